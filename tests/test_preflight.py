"""submission.preflight: what this machine can run, decided before anything is written; the
precision of a CPU run, and what a launch says before it starts."""
from __future__ import annotations

import pytest

from conftest import run_submission
from submission import inventory, preflight
from submission.config import ConfigError, resolve


def _images(root):
    for split in ("train", "val"):
        (root / split / "n01").mkdir(parents=True)
    return root


@pytest.mark.parametrize("bf16, advice", [
    (["avx512_bf16"], "or amp_dtype=bf16 (this CPU has avx512_bf16"),
    ([], "this CPU has no bf16 instructions, so amp_dtype=bf16 would be emulated too"),
])
def test_fp16_autocast_on_a_cpu_is_refused_naming_what_to_use(monkeypatch, tmp_path, bf16, advice):
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: bf16)
    config = resolve("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "workers_per_device": "1"})
    assert (config.precision, config.amp_dtype) == ("amp", "fp16")      # the recipe's, untouched
    with pytest.raises(ConfigError) as refused:
        preflight.launch_plan(config).approved()
    message = str(refused.value)
    assert "precision=amp amp_dtype=fp16 (submission/recipes/mild.yaml) on the CPU" in message
    assert "pass precision=fp32" in message and advice in message


def test_bf16_on_a_cpu_runs_only_where_the_cpu_has_bf16_instructions(monkeypatch, tmp_path):
    config = resolve("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "workers_per_device": "1",
                               "amp_dtype": "bf16"})
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: ["amx_bf16"])
    assert preflight.precision_problems(config) == []
    monkeypatch.setattr(inventory, "cpu_bf16", lambda: [])
    assert "would be emulated, slower than fp32; pass precision=fp32" in preflight.precision_problems(config)[0]
    assert preflight.precision_problems(config.replaced({"precision": "fp32"}, "test")) == []


def test_the_cpu_descriptor_states_its_precision(tmp_path):
    config = resolve("cpu", {"dataset": "imagenet", "data_dir": str(tmp_path)})
    assert config.precision == "fp32" and config.origin("precision") == "systems/cpu.json"


@pytest.mark.e2e
def test_a_cpu_launch_with_fp16_is_refused_before_anything_is_written(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    done = run_submission("run", "system=local", f"data_dir={_images(tmp_path / 'images')}", "device=cpu",
                          f"results_dir={results}", f"cache_dir={cache}", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "fp16 autocast has no fast kernels on CPUs" in done.stderr and "pass precision=fp32" in done.stderr
    assert "Traceback" not in done.stderr
    assert not results.exists() and not cache.exists()


def test_a_changed_published_loader_is_said_once_and_recorded(capsys):
    from submission import runs
    from submission.system_description import run_description
    config = resolve("cpu", {"train_loader": "torchvision"})
    runs.plan_launch(config)
    said = [line for line in capsys.readouterr().out.splitlines() if "published loader" in line]
    assert said == ["[campaign] train_loader=torchvision (the command line): the mild recipe's published "
                    "loader is ffcv (submission/recipes/mild.yaml); the run's system description records "
                    "the change"]
    assert run_description(config)["sw_notes"].endswith("; train_loader torchvision (the recipe's: ffcv)")
    assert "train_loader" not in run_description(resolve("cpu", {}))["sw_notes"]
    assert "precision fp32" in run_description(config)["sw_notes"]


def test_the_launch_line_names_the_loader_threads_that_will_run(tmp_path, capsys, monkeypatch):
    """A lowered workers_per_device is what the first line says, and the note after it says why."""
    from submission import distributed, runs
    monkeypatch.setattr(distributed, "usable_cpus", lambda: 2)
    config = resolve("local", {"data_dir": str(_images(tmp_path)), "device": "cpu", "precision": "fp32"})
    assert config.workers_per_device == 8
    runs.plan_launch(config)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 process(es), 2 torch and 2 loader threads each"), lines[0]
    assert lines[1] == "[campaign] workers_per_device=2: 2 usable CPUs / 1 process(es) (was 8)"
