"""submission/jsonfile.py: JSON written whole or not at all, indented for people or
compact for large files."""
from __future__ import annotations

import json

import pytest

from submission.jsonfile import write_json

RECORD = {"seeds": [1, 2], "settings": {"batch": 256, "name": "café"}}


def test_indented_for_people_and_compact_for_large_files(tmp_path):
    readable, compact = tmp_path / "campaign.json", tmp_path / "verified-train.json"
    write_json(readable, RECORD)
    write_json(compact, RECORD, compact=True)
    assert readable.read_text() == json.dumps(RECORD, indent=1) + "\n"
    assert compact.read_text() == '{"seeds":[1,2],"settings":{"batch":256,"name":"caf\\u00e9"}}\n'
    assert json.loads(readable.read_text()) == json.loads(compact.read_text()) == RECORD


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "verified-val.json"
    write_json(target, RECORD, compact=True)
    with pytest.raises(TypeError):
        write_json(target, {"seeds": object()}, compact=True)
    (tmp_path / "a folder.json").mkdir()
    with pytest.raises(IsADirectoryError):               # fails at the rename, once written
        write_json(tmp_path / "a folder.json", RECORD)
    assert json.loads(target.read_text()) == RECORD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a folder.json", "verified-val.json"]
