"""`python -m submission project`: the projection printed, and every refused profile=
and loader_profile= named with the option, the file and the bench command that makes one."""
from __future__ import annotations

import json

import pytest

from submission.cli import main as cli_main

from conftest import REPO
from hand_profiles import _gpu_mild, _profile, _torchvision_loader


def test_command_without_profile_says_how_to_make_one(capsys):
    assert cli_main(["project", "system=p4d"]) == 2
    err = capsys.readouterr().err
    assert "no profile for p4d" in err and "176 px" in err
    assert "python -m submission bench system=p4d json=profile-p4d.json" in err


def test_command_prints_the_projection(tmp_path, capsys):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile([16, 20, 24, 28, 32])))
    assert cli_main(["project", "system=cpu", f"profile={path}", "price_usd_per_hour=1.5",
                     "price_source=test list", "price_date=2026-11"]) == 0
    out = capsys.readouterr().out
    assert "**one run (run_start→run_stop), whole budget**" in out and "campaign of 5 runs" in out
    assert "price $1.5/hour for the whole system: test list, 2026-11" in out
    assert "measured 2026-11-22 on test host, 2 cores" in out
    path.write_text("{not json")
    assert cli_main(["project", "system=cpu", f"profile={path}"]) == 2
    assert "not valid JSON (line 1" in capsys.readouterr().err


def _damaged(change):
    profile = _profile([16, 20, 24, 28, 32], setup={"first_eval_extra": 1.0})
    change(profile)
    return profile


@pytest.mark.parametrize("change, field", [
    (lambda p: p["loader"].pop("threads"), "loader.threads is missing"),
    (lambda p: p["loader"].update(threads=0), "loader.threads is 0"),
    (lambda p: p["loader"].update(img_per_s=0), "loader.img_per_s is 0"),
    (lambda p: p.update(loader="fast"), 'loader is "fast"'),
    (lambda p: p.update(eval_img_per_s=0), "eval_img_per_s is 0"),
    (lambda p: p.update(eval_img_per_s=-5), "eval_img_per_s is -5"),
    (lambda p: p.update(eval_img_per_s="1000"), 'eval_img_per_s is "1000"'),
    (lambda p: p["train_step"]["24"].update(img_per_s=0), "train_step.24.img_per_s is 0"),
    (lambda p: p["train_step"].update({"24": {}}), "train_step.24.img_per_s is missing"),
    (lambda p: p.update(measured=None), "measured is null"),
    (lambda p: p.update(settings=[]), "settings is []"),
    (lambda p: p.update(setup_s="x"), 'setup_s is "x"'),
    (lambda p: p.update(loader_setup_s={"cold": {}}), "loader_setup_s.cold.train_first_batch_s is missing"),
    (lambda p: p["settings"].update(train_resolution="x"), 'settings.train_resolution is "x"'),
    (lambda p: p.update(fed_step_by_side={"16": {"fed_img_per_s": 5}}),
     "fed_step_by_side.16.synthetic_img_per_s is missing"),
])
def test_a_malformed_profile_names_the_file_the_field_and_the_bench(tmp_path, capsys, change, field):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_damaged(change)))
    assert cli_main(["project", "system=cpu", f"profile={path}"]) == 2
    err = capsys.readouterr().err
    assert f"profile {path} is not a bench profile the projection can use: {field}, not " in err
    assert "python -m submission bench system=cpu json=profile-cpu.json" in err


def test_an_unreadable_profile_names_the_file(tmp_path, capsys):
    binary = tmp_path / "profile.json"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    for path in (binary, tmp_path):
        assert cli_main(["project", "system=cpu", f"profile={path}"]) == 2
        err = capsys.readouterr().err
        assert f"profile {path} cannot be read as a JSON text file" in err
        assert "python -m submission bench system=cpu" in err


def test_a_loader_of_the_wrong_kind_is_refused_naming_both_files_and_the_bench(tmp_path, capsys):
    gpu, cpu = tmp_path / "gpu.json", tmp_path / "cpu-mild.json"
    gpu.write_text(json.dumps(_gpu_mild()))
    cpu.write_text(json.dumps(_gpu_mild()))          # an FFCV loader: Mild's
    assert cli_main(["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3",
                     f"profile={gpu}", f"loader_profile={cpu}"]) == 2
    err = capsys.readouterr().err
    assert "the hot recipe loads its training images with the torchvision loader" in err
    assert f"the loader figures of {cpu} were measured with the ffcv loader" in err
    assert f"profile {gpu} with loader_profile {cpu}" in err
    assert ("`python -m submission bench recipe=hot scale_schedule_ratio=3 data_dir=DIR json=loader-hot.json`"
            in err)
    # without loader_profile, the GPU profile's own FFCV loader is refused the same way
    assert cli_main(["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3",
                     f"profile={gpu}"]) == 2
    assert "measured with the ffcv loader" in capsys.readouterr().err
    # the reverse: a torchvision loader for Mild, which loads with FFCV
    cpu.write_text(json.dumps(_torchvision_loader()))
    assert cli_main(["project", "system=p4d", f"profile={gpu}", f"loader_profile={cpu}"]) == 2
    err = capsys.readouterr().err
    assert "the mild recipe loads its training images with the ffcv loader" in err
    assert "`python -m submission bench recipe=mild data_dir=DIR json=loader-mild.json`" in err
    # the right kind projects, and says where the loader figures come from
    cpu.write_text(json.dumps(_torchvision_loader()))
    assert cli_main(["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3",
                     f"profile={gpu}", f"loader_profile={cpu}"]) == 0
    out = capsys.readouterr().out
    assert f"from loader_profile {cpu}" in out and "Where the loader limits:" in out


# --- the errors of profile= and loader_profile=: the option, the file, the command ---------
HOT = ["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3"]
HOT_LOADER_BENCH = "`python -m submission bench recipe=hot scale_schedule_ratio=3 data_dir=DIR json=loader-hot.json`"
P4D_BENCH = "`python -m submission bench system=p4d json=profile-p4d.json`"


def _bad_files(tmp_path):
    """(file, what the message says of it) for each way a file is not a usable profile."""
    files = {"missing.json": None, "text.json": "{not json", "list.json": "[1, 2]",
             "descriptor.json": json.dumps({"system_name": "x"}), "newer.json": json.dumps({"schema": 3}),
             "damaged.json": json.dumps({**_torchvision_loader(), "eval_img_per_s": 0})}
    said = {"missing.json": "does not exist", "text.json": "is not valid JSON (line 1",
            "list.json": "is JSON, but not a bench profile: it is an array, not an object",
            "descriptor.json": 'is JSON, but not a bench profile: it has no "schema" field; a profile '
                               "is what `python -m submission bench ... json=FILE` writes",
            "newer.json": "is a schema-3 bench profile, newer than this harness reads (schema 2)",
            "damaged.json": "is not a bench profile the projection can use: eval_img_per_s is 0"}
    for name, content in files.items():
        if content is not None:
            (tmp_path / name).write_text(content)
    return [(tmp_path / name, said[name]) for name in files]


def test_each_bad_loader_profile_names_the_option_the_file_and_the_loader_bench(tmp_path, capsys):
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(_gpu_mild()))
    for path, said in _bad_files(tmp_path):
        assert cli_main(HOT + [f"profile={gpu}", f"loader_profile={path}"]) == 2
        err = capsys.readouterr().err
        assert f"loader_profile {path} {said}" in err, err
        assert f"measure the torchvision loader with {HOT_LOADER_BENCH}" in err, err
        assert "pass loader_profile=loader-hot.json" in err and "system=p4d json=" not in err, err


def test_each_bad_profile_names_the_option_the_file_and_the_bench(tmp_path, capsys):
    for path, said in _bad_files(tmp_path):
        assert cli_main(["project", "system=p4d", f"profile={path}"]) == 2
        err = capsys.readouterr().err
        assert f"error: profile {path} {said}" in err, err
        assert f"measure one on the target machine: {P4D_BENCH}" in err, err


SHIPPED_H200 = REPO / "docs" / "qualify-h200-2026-11-26-981969e"


def test_the_shipped_compiled_h200_profile_projects_its_sides_in_between_named(tmp_path, capsys):
    """qualify's compiled bench measures two sides (88 and 176 px): the run's sides between them
    are inferred, along the eager profile beside it in qualify's folder, else by the area."""
    compiled = SHIPPED_H200 / "profile_mild-compiled-graphs.json"
    assert cli_main(["project", "system=a100-80gb", f"profile={compiled}"]) == 0
    out = capsys.readouterr().out
    minutes = float(out.split("**one run (run_start→run_stop), whole budget** | | | | **")[1].split("**")[0])
    assert 5 < minutes < 60, minutes
    assert "the step compiled + CUDA graphs, as the profile measured it at 88, 176 px" in out
    assert ("96, 104, 112, 116, 124, 132, 140, 148, 156, 164, 172 px between 88 and 176 px, along the "
            "eager step's cost per image (the eager profile profile_mild.json beside it)") in out
    assert "CUDA graphs, which this harness replays in a run of one process only" in out   # 8 GPUs

    alone = tmp_path / compiled.name          # no eager profile beside it: by the area
    alone.write_text(compiled.read_text())
    assert cli_main(["project", "system=a100-80gb", f"profile={alone}"]) == 0
    assert "172 px between 88 and 176 px, linear in the area" in capsys.readouterr().out
