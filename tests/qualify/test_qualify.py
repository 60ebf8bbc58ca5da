"""`python -m submission qualify` at CPU scale, as a user runs it: every recipe's profile and a
short campaign inside the budget, in a folder small enough to copy back from a rented machine."""
from __future__ import annotations

import json
import shlex
import time

import pytest

from submission.cli import main as cli_main
from submission.options import QualifyOptions
from submission.qualify import plan, record
from submission.qualify.command import Qualify

from conftest import run_submission
from image_folders import make_nested, write_image

# the parts took 6.7-6.9 min on a slow 2-vCPU build machine (docs/qualify.md): a budget twice
# that lets every part fit on a machine as slow, busy with something else besides
BUDGET_MINUTES = 15


# Mild (the first: the campaign's recipe) and Hot (SAM's stretches, the torchvision loader):
# Medium's bench is the same code as Hot's on FFCV's loader, and its 10-step SAM stretches made
# it the slowest part (docs/test-suite.md); test_plan.py checks that the default plan has all three
PROFILED = ("mild", "hot")


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # what is measured is not asserted; the bench's tests compile
def test_qualify_profiles_the_recipes_asked_and_times_a_campaign_inside_its_budget(tmp_path):
    out = tmp_path / "out"
    began = time.monotonic()
    done = run_submission("qualify", f"minutes={BUDGET_MINUTES}", f"out={out}",
                          f"recipes={','.join(PROFILED)}", f"cache_dir={tmp_path / 'cache'}",
                          timeout=BUDGET_MINUTES * 60 + 120)
    elapsed = time.monotonic() - began
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert elapsed < BUDGET_MINUTES * 60 + 30, f"took {elapsed:.0f} s of a {BUDGET_MINUTES}-min budget"
    assert f"The record: {out / record.MARKDOWN}" in done.stdout

    files = {p.name: p.stat().st_size for p in out.iterdir()}
    assert len(files) <= 8 and max(files.values()) < 4 * 2**20, files
    assert {record.MARKDOWN, record.RECORD, record.LOG, record.REPORT,
            *(record.profile_name(r) for r in PROFILED)} <= set(files)
    assert record.profile_name("medium") not in files

    q = record.read(out)
    status = {part.name: part.status for part in q.parts}
    assert [status[p.name] for p in plan.parts("cpu", PROFILED)] == [record.DONE] * 3, status
    assert set(status) == {p.name for p in plan.parts("cpu", PROFILED)}
    assert not q.compiled and plan.NOT_COMPILED["cpu"] in (out / record.MARKDOWN).read_text()
    assert [r.recipe for r in q.recipes] == list(PROFILED)
    for recipe in q.recipes:                                      # each profile projects a run
        words = shlex.split(recipe.project_command)[3:]
        projected = run_submission(*words, timeout=180)
        assert projected.returncode == 0, projected.stderr
        assert f"# Projection: recipe {recipe.recipe}" in projected.stdout
        assert json.loads((out / recipe.profile).read_text())["settings"]["recipe"] == recipe.recipe

    # each recipe's loader and the device loader beside it, side by side in qualify.md
    assert [[loader.kind for loader in r.loaders] for r in q.recipes] == [["ffcv", "device"], ["torchvision", "device"]]
    assert all(loader.img_per_s > 0 and loader.eval_img_per_s > 0 and loader.fed_ratio
               for r in q.recipes for loader in r.loaders)
    text = (out / record.MARKDOWN).read_text()
    assert "| mild | device |" in text and "| hot | torchvision |" in text and "| hot | device |" in text
    campaign = q.campaign
    assert campaign is not None and len(campaign.runs) == 2
    assert campaign.learned is True and f"**Verdict: {campaign.verdict}.**" in text   # test_campaign_and_signals
    assert all(run.minutes and run.minutes > 0 and run.first_window_ratio for run in campaign.runs)
    for run in campaign.runs:     # measured where RAPL is readable, else not measured and why
        assert (run.joules is None) == campaign.energy_note.startswith("not measured: ")
        assert run.joules is None or run.joules > 0
    assert "RAPL" in campaign.energy_note
    assert "## The short campaign" in text and campaign.energy_note.split(":")[0] in text
    assert "| energy (kJ) |" in (out / record.REPORT).read_text()
    _hot_profile_measures_its_loader_and_its_sam_steps(out)


def _hot_profile_measures_its_loader_and_its_sam_steps(out):
    """Hot's part is the bench of Hot (scale_schedule_ratio 3): its torchvision loader, the CPU
    work of its transforms, and timed stretches holding whole SAM steps (read here rather than
    from a bench of its own: the suite's time, docs/test-suite.md)."""
    data = json.loads((out / record.profile_name("hot")).read_text())
    log = (out / record.LOG).read_text()
    loader = data["loader"]
    assert loader["kind"] == "torchvision" and loader["img_per_s"] > 0 and loader["threads"] >= 1
    assert loader["img_per_s_per_thread"] == pytest.approx(loader["img_per_s"] / loader["threads"])
    augmentation = data["augmentation_ms_per_image"]
    stages = ("decode", "crop_flip", "randaugment", "to_tensor")
    assert all(augmentation[stage] > 0 for stage in stages), augmentation
    assert augmentation["total"] == sum(augmentation[stage] for stage in stages)
    assert augmentation["images"] >= 100 and augmentation["threads"] == 1
    assert "torchvision train loader alone" in log and "per loader thread:" in log
    assert "RandAugment (all, depth 1, severity 10)" in log
    # qualify's steps=3 is raised to 5, a multiple of sam_interval: each side's mean holds one SAM step
    assert data["settings"]["sam_interval"] == 5 and data["measured"]["steps"] == 5
    assert "each timed stretch is 5 steps (raised from 3, a multiple of sam_interval)" in log
    for side in data["train_step"].values():
        assert side["timed_steps"] == 5 and side["sam_steps"] == 1 and side["img_per_s"] > 0
    assert "(mean of 5 steps, 1 of them SAM)" in log


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
