"""submission/jsonfile.py: JSON written whole or not at all, indented for people or
compact for large files; a record and its parts read back from JSON."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import pytest

from submission.jsonfile import record_from_dict, write_json

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


@dataclass(frozen=True)
class _Reading:
    top1: float
    note: str = ""


@dataclass(frozen=True)
class _Run:
    name: str
    readings: tuple[_Reading, ...] = ()
    best: _Reading | None = None
    others: list[_Reading] = field(default_factory=list)


def test_a_record_and_its_parts_come_back_from_json_as_written():
    run = _Run("run_0", (_Reading(0.5), _Reading(0.7, "last")), _Reading(0.7), [_Reading(0.1)])
    text = json.dumps(dataclasses.asdict(run))
    assert record_from_dict(_Run, json.loads(text)) == run
    assert record_from_dict(_Run, {"name": "x", "best": None}) == _Run("x")


def test_unknown_keys_are_left_out_unless_strict_which_names_them_and_the_missing_ones():
    later = {"name": "run_0", "written_by_a_later_release": 1}
    assert record_from_dict(_Run, later) == _Run("run_0")
    with pytest.raises(ValueError, match=r"_Run: missing keys \[\], unknown keys \['written_by_a_later_release'\]"):
        record_from_dict(_Run, later, strict=True)
    with pytest.raises(ValueError, match=r"_Reading: missing keys \['top1'\]"):
        record_from_dict(_Run, {"name": "x", "readings": [{"note": "no top1"}]}, strict=True)
    with pytest.raises(ValueError, match="needs a JSON object, got list"):
        record_from_dict(_Run, [1, 2])
