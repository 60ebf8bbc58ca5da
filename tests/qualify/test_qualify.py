"""`python -m submission qualify` refuses what it cannot measure before anything runs, and says
when nothing was measured; its parts at CPU scale run in test_qualify_runs.py."""
from __future__ import annotations

from submission.cli import main as cli_main
from submission.options import QualifyOptions
from submission.qualify import plan, record
from submission.qualify.command import Qualify

from image_folders import make_nested, write_image


def test_bad_options_are_refused_before_anything_runs(tmp_path, capsys):
    for words, message in ((["minutes=0"], "minutes=0: give a number above 0"),
                           (["recipes=mild,spicy"], "qualify profiles mild, medium, hot"),
                           (["out="], "out takes a value")):
        assert cli_main(["qualify", *words, f"cache_dir={tmp_path}", f"out={tmp_path / 'out'}"]) == 2
        assert message in capsys.readouterr().err
        assert not list(tmp_path.iterdir())


def test_unusable_images_are_refused_once_before_any_part_naming_them_and_the_way_out(tmp_path, capsys):
    root = tmp_path / "images"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    empty, cut, text = root / "train" / "cat" / "empty.JPEG", root / "train" / "dog" / "cut.JPEG", \
        root / "val" / "fox" / "notes.JPEG"
    empty.write_bytes(b"")
    cut.write_bytes(write_image(tmp_path / "whole.JPEG", 1, 7, size=(40, 40)).read_bytes()[:300])
    text.write_text("not an image\n")
    out = tmp_path / "out"
    assert cli_main(["qualify", f"data_dir={root}", f"out={out}", f"cache_dir={tmp_path / 'cache'}"]) == 2
    said = capsys.readouterr()
    assert "3 unusable images" in said.err and "skip_bad_images=true" in said.err
    assert all(str(path) in said.err for path in (empty, cut, text)), said.err
    assert "bench mild" not in said.out and not out.exists()


def test_nothing_measured_exits_1_and_the_last_line_says_what_was_not(tmp_path, capsys):
    root = tmp_path / "images"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    out = tmp_path / "out"
    assert cli_main(["qualify", "minutes=0.01", "recipes=mild", f"data_dir={root}", f"out={out}",
                     f"cache_dir={tmp_path / 'cache'}"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert ("done in " in last and "nothing measured; left out for the budget: bench mild, campaign of 2 runs "
            "(mild). Give minutes=") in last and last.endswith(f"The record: {out / record.MARKDOWN}"), last
    assert [part.status for part in record.read(out).parts] == [record.LEFT_OUT] * 2


def test_results_dir_places_the_record_and_the_campaign_stays_in_qualifys_own_folder(tmp_path):
    mine = tmp_path / "my-results"
    q = Qualify(QualifyOptions(), {"results_dir": str(mine), "cache_dir": str(tmp_path / "cache")})
    assert q.out.parent == mine / "qualify"
    campaign = next(part for part in plan.parts(q.device_type) if part.verb == "run")
    words = q.argv(campaign)
    assert f"results_dir={q.scratch / 'campaign'}" in words
    assert not any(str(mine) in word for word in words), words
