"""The bench: every figure it prints comes from a real measurement; small data cycles."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from submission.bench_profile import read as read_profile

from conftest import REPO, child_env


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # what numba compiles is asserted by test_warmup.py, not here
def test_bench_on_a_small_training_set_writes_a_profile_of_every_size(tmp_path, cache_dir):
    profile = tmp_path / "profile.json"
    # 256 training images are 8 batches, fewer than the bench reads (the step fed by the loader
    # takes its warm-up and timed steps in each of 2 rounds at 2 sides): it cycles
    done = subprocess.run(
        [sys.executable, "-m", "submission", "bench", "system=cpu", f"cache_dir={cache_dir}",
         "train_limit=256", "eval_limit=64", "batch_per_device=32", "workers_per_device=1",
         "epochs=4", "steps=1", "rounds=2", f"json={profile}"],   # 32 steps: every size of the ramp
        cwd=REPO, capture_output=True, text=True, timeout=600, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(profile.read_text())
    assert data["schema"] == 2 and data["measured"]["device"] == "cpu"
    assert read_profile(profile).train_step[32].img_per_s == data["train_step"]["32"]["img_per_s"]
    assert data["measured"]["rounds"] == 2 and data["plain_loop_img_per_s"] > 0
    assert ("(timed in turns, the best of 2 rounds each: the plain loop with the first row; the "
            "fed step with a recipe step of its own, shown beside it)") in done.stdout
    assert sorted(map(int, data["train_step"])) == [16, 20, 24, 28, 32]
    for figures in data["train_step"].values():
        assert figures["img_per_s"] > 0 and figures["first_step_s"] > 0
    assert data["eval_img_per_s"] > 0 and data["loader"]["img_per_s"] > 0
    assert isinstance(data["loader"]["epoch_start_s"], float) and "each epoch's start costs" in done.stdout
    assert data["eval_forward_img_per_s"] > 0 and "evaluation forward, synthetic, 32 px" in done.stdout
    fed = data["fed_step_by_side"]                 # at full size and at the smallest side
    fed_row = next(line for line in done.stdout.splitlines() if "step fed by the FFCV loader  " in line)
    assert fed_row.endswith(f"x the recipe step beside it ({fed['32']['synthetic_img_per_s']:.1f} img/s)")
    assert sorted(map(int, fed)) == [16, 32] and all(v["in_turns"] is True for v in fed.values())
    assert all(v["fed_img_per_s"] > 0 and v["synthetic_img_per_s"] > 0 for v in fed.values())
    assert "the step fed by the FFCV loader, in turns with the synthetic step" in done.stdout
    # compile=false: the compiled step is neither timed nor fed, and the rows say so
    assert "compiled_fed_step_by_side" not in data and "compiled_fed_step_by_side" not in data["loader_beside"]
    assert ("the compiled step fed by the device loader: not measured (compile=false: the bench compiles the "
            "step only with compile=true; on a CPU too,") in done.stdout
    assert "gpuGetDeviceCount" not in done.stdout + done.stderr and "USDT" not in done.stdout + done.stderr
    # the device loader beside FFCV's: the same rows, then one row per loader
    beside = data["loader_beside"]
    assert beside["loader"]["kind"] == "device" and beside["loader"]["img_per_s"] > 0
    assert sorted(map(int, beside["fed_step_by_side"])) == [16, 32] and beside["eval_img_per_s"] > 0
    table = done.stdout.split("the loaders side by side")[1].splitlines()
    assert table[1].split()[:4] == ["loader", "img/s", "alone", "threads"]
    rows = {line.split()[0]: line.split() for line in table[2:4]}
    assert set(rows) == {"FFCV", "device"} and rows["FFCV"][1:3] == ["(the", "run's)"]
    ratio = fed["32"]["fed_img_per_s"] / fed["32"]["synthetic_img_per_s"]
    assert rows["FFCV"][5] == f"{ratio:.2f}x" and rows["device"][2] == "1"
    # per batch: the device loader's torch operations counted, FFCV's made out of the profiler's sight
    assert "torch_ops_per_batch" not in data["loader"] and data["loader"]["host_s_per_batch"] > 0
    assert 0 < beside["loader"]["torch_ops_per_batch"] <= 32 and beside["loader"]["host_s_per_batch"] > 0
    assert beside["loader"]["device_part_s_per_batch"] > 0
    assert rows["FFCV"][-2] == "n/a" and rows["device"][-2] == str(beside["loader"]["torch_ops_per_batch"])
    assert "per batch: torch operations n/a (made in FFCV's own threads" in done.stdout
    assert data["settings"]["cudnn_benchmark"] is False is data["settings"]["compile_dynamic"]
    assert 0 < data["mfu"]["mfu"] < 1 and data["mfu"]["flops_per_image"] > 1e8
    overhead = data["loop_overhead"]
    assert overhead["side"] == 16 and overhead["normalize_resize_s"] > 0 and overhead["ema_s"] > 0
    assert 0 < overhead["share_of_step"] < 1
    for probe in ("cold", "warm"):
        assert data["loader_setup_s"][probe]["train_first_batch_s"] > 0
        assert data["loader_setup_s"][probe]["val_first_pass_s"] > 0
        setup = data["loader_setup_s"][probe]
        assert 0 < setup["build_s"] + setup["epoch_start_s"] < setup["train_first_batch_s"]
    assert data["loader_setup_s"]["warm"]["warm_up_s"] > 0 == data["loader_setup_s"]["cold"]["warm_up_s"]
    for row in ("plain torchvision loop", "MFU", "progressive-resizing sizes", "first training batch"):
        assert row in done.stdout
    # the train loader alone by its threads, up to the CPUs this process may use
    from submission.bench.thread_rows import thread_counts
    from submission.inventory import usable_cpus
    sweep = data["loader_sweep"]
    assert sweep["kind"] == "ffcv" and sweep["cpus"] == usable_cpus() and sweep["resolution"] == 32
    assert sorted(map(int, sweep["by_threads"])) == thread_counts(usable_cpus(), None)
    assert all(rate["img_per_s"] > 0 for rate in sweep["by_threads"].values())
    assert "the FFCV train loader alone by its threads" in done.stdout
    assert read_profile(profile).loader_sweep.img_per_s[1] == sweep["by_threads"]["1"]["img_per_s"]


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # what is timed is not asserted: the rows, the files, their sizes
def test_loader_sweep_times_every_write_option_on_the_same_images(tmp_path):
    from submission.bench.thread_rows import thread_counts
    from submission.inventory import usable_cpus

    from image_folders import make_nested
    make_nested(tmp_path / "images", train_counts=(12, 12, 12), val_counts=(2, 2, 2))
    done = subprocess.run(
        [sys.executable, "-m", "submission", "bench", "sweep=loader", "system=cpu", "dataset=imagenet",
         f"data_dir={tmp_path / 'images'}", f"cache_dir={tmp_path / 'cache'}", "batch_per_device=8",
         "workers_per_device=1", "train_resolution=32", "steps=1"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if "KiB/image" in line]
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("proportion", "500", "q90"), ("raw", "500", "q90"), ("jpg", "500", "q90"),
        ("proportion", "350", "q90"), ("jpg", "350", "q75")]
    assert all(float(r[6]) > 0 and float(r[8]) > 0 and float(r[4]) > 0 for r in rows)   # FFCV, device
    # the device loader per batch: its torch operations, its host's gather; no decode on the device
    # on a CPU (its JPEGs are decoded on the host)
    assert all(0 < int(r[10]) <= 32 and float(r[11]) > 0 and r[12] == "-" and float(r[13]) > 0 for r in rows)
    assert ("FFCV loader     device loader  ops/batch  host ms  decode ms  device ms  slot wait ms  batch wait ms"
            "  syncs/batch") in done.stdout
    assert all(float(r[14]) >= 0 and float(r[15]) >= 0 and float(r[16]) == 0 for r in rows)    # no host waits on a CPU
    assert "36 images" in done.stdout
    threads = done.stdout.split("the FFCV train loader alone by its threads")[1].splitlines()[2:]
    assert [int(row.split()[0]) for row in threads if row.strip()[:1].isdigit()] == thread_counts(usable_cpus(), None)
    betons = list((tmp_path / "cache" / "images").glob("train-*.beton"))
    assert len(betons) == 5                          # one file per write option
    raw, jpg = (next(r for r in rows if r[0] == mode and r[1] == "500") for mode in ("raw", "jpg"))
    assert float(raw[4]) > float(jpg[4])             # raw pixels take more room than JPEG


@pytest.mark.e2e
def test_unknown_sweep_is_refused():
    done = subprocess.run([sys.executable, "-m", "submission", "bench", "sweep=gpu"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "sweep=loader" in done.stderr


@pytest.mark.e2e
def test_unknown_comparison_is_refused():
    done = subprocess.run([sys.executable, "-m", "submission", "bench", "compare=timm"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "compare=composer" in done.stderr and "compare=methods" in done.stderr


@pytest.mark.e2e
def test_composer_comparison_without_composer_says_how_to_install_it(tmp_path):
    """Composer is not a dependency: without it the comparison stops before preparing any
    data, and says where the install command is."""
    hide = ("import sys; sys.modules['composer'] = None; sys.argv[0] = 'bench'; "
            "from submission.cli import main; sys.exit(main(['bench', *sys.argv[1:]]))")
    done = subprocess.run([sys.executable, "-c", hide, "compare=composer", "system=cpu",
                           f"cache_dir={tmp_path / 'cache'}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs MosaicML Composer" in done.stderr and "submission.bench.compare_composer" in done.stderr
    assert not (tmp_path / "cache").exists()


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # the steps on synthetic batches are compared, not the loader
def test_method_comparison_times_each_variant_and_the_plain_loop(cache_dir):
    from submission.bench.compare_methods import PLAIN_ROW, RECIPE_ROW, VARIANTS
    done = subprocess.run(
        [sys.executable, "-m", "submission", "bench", "compare=methods", "system=cpu",
         f"cache_dir={cache_dir}", "train_limit=256", "eval_limit=64", "batch_per_device=8",
         "steps=1", "rounds=2"], cwd=REPO, capture_output=True, text=True, timeout=600, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split("  ")[1].strip(): line for line in done.stdout.splitlines()
            if line.endswith("x the recipe step")}
    # Mild: BlurPool, BCE and SGDW swapped, in the table's order; nothing of Medium's or Hot's
    mild = ("without BlurPool", "cross-entropy instead of BCE", "torch.optim.SGD instead of DecoupledSGDW")
    assert list(rows) == [RECIPE_ROW] + [m.without for m in VARIANTS if m.without in mild] + [PLAIN_ROW]
    assert len(rows) == 5
    rate = {row: float(line.split()[-6]) for row, line in rows.items()}
    assert all(value > 0 for value in rate.values())
    printed = float(done.stdout.split("the recipe step is ")[1].split("x")[0])
    assert abs(printed - rate[RECIPE_ROW] / rate[PLAIN_ROW]) < 0.02
    assert "best of 2 rounds of 1 steps" in done.stdout


def test_every_method_variant_swaps_something_the_recipe_has():
    """A misspelt key would leave a variant identical to the recipe's step, silently. Hot
    has every method, so every variant must change something of it."""
    from submission.bench.compare_methods import VARIANTS
    from submission.config import resolve
    recipe = resolve(None, {"recipe": "hot"})
    for method in VARIANTS:
        row = method.without
        assert method.setting in recipe.settings, f"{row}: {method.setting} is no setting"
        assert method.swapped_in_code or recipe.settings[method.setting] != method.off, \
            f"{row}: the recipe already has {method.setting}={method.off}"


@pytest.mark.e2e
def test_bench_refuses_a_round_count_that_is_no_whole_number():
    done = subprocess.run([sys.executable, "-m", "submission", "bench", "compare=methods", "rounds=0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "rounds=0: give a whole number above 0" in done.stderr


class _Epoch:
    """An epoch of a loader whose start takes `start_s` and each batch `batch_s` (the loaders'
    protocol's Epoch: an iterator with close)."""

    def __init__(self, batches: int, start_s: float, batch_s: float):
        self.left, self.start_s, self.batch_s, self.first = batches, start_s, batch_s, True

    def __iter__(self):
        return self

    def __next__(self):
        import time

        import torch
        if not self.left:
            raise StopIteration
        self.left -= 1
        time.sleep(self.batch_s + (self.start_s if self.first else 0.0))
        self.first = False
        return torch.zeros(8, 1), torch.zeros(8)

    def close(self):
        self.left = 0


class _Loader:
    def __init__(self, batches: int, start_s: float, batch_s: float):
        self.batches, self.start_s, self.batch_s = batches, start_s, batch_s

    def __len__(self):
        return self.batches

    def __iter__(self):
        return _Epoch(self.batches, self.start_s, self.batch_s)


def test_loader_alone_separates_each_epochs_start_from_its_steady_rate():
    """A 3-batch epoch that starts 0.4 s late: cycling through epochs (what the bench did)
    would report a third of the rate; the steady rate and the start are told apart."""
    import pytest
    import torch

    from submission.bench.timing import loader_alone
    rate, start = loader_alone(_Loader(3, 0.4, 0.02), 12, torch.device("cpu"))
    assert 8 / 0.02 * 0.5 < rate <= 8 / 0.02        # cycling epochs would give under a third
    assert start == pytest.approx(0.4, abs=0.15)
    rate, start = loader_alone(_Loader(100, 0.4, 0.02), 12, torch.device("cpu"), restarts=0)
    assert 8 / 0.02 * 0.5 < rate <= 8 / 0.02 and start is None
    with pytest.raises(Exception, match="needs at\\s+least 2"):
        loader_alone(_Loader(1, 0.0, 0.0), 4, torch.device("cpu"))


def test_workers_are_fitted_to_the_usable_cpus_as_a_campaign_fits_them(monkeypatch, capsys):
    """The harness's own workers_per_device is lowered to the CPUs this process may use
    (numba refuses more threads than CPUs, deep inside the loader); a user's is refused."""
    import os

    import pytest

    from submission.bench.command import fitted
    from submission.config import ConfigError, resolve
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    config = resolve("cpu", {})
    assert config.workers_per_device > 1
    lowered = fitted(config)
    assert lowered.workers_per_device == 1 and config.workers_per_device > 1   # a new config
    assert "workers_per_device=1" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="pass workers_per_device=1"):
        fitted(resolve("cpu", {"workers_per_device": "4"}))


def test_timed_stretches_of_a_sam_recipe_are_whole_multiples_of_its_interval():
    """Every sam_interval-th step is two passes: a stretch of 3 steps of Hot (interval 5)
    would hold 0 or 1 SAM steps depending on where it starts; 5 hold exactly 1."""
    from submission.bench.measure import sam_steps
    from submission.config import resolve
    hot = resolve("cpu", {"recipe": "hot", "scale_schedule_ratio": "3"})
    assert [sam_steps(hot, n) for n in (1, 3, 5, 6, 10)] == [5, 5, 5, 10, 10]
    assert [sam_steps(resolve("cpu", {}), n) for n in (1, 3, 10)] == [1, 3, 10]     # Mild: no SAM


# Hot's bench (torchvision loader, its CPU work, SAM's whole stretches) is read from qualify's
# part of Hot: tests/qualify/test_qualify.py
