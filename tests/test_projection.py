"""submission.projection: minutes and dollars of a run from a hand-written bench profile."""
from __future__ import annotations

import json

import pytest

from submission import config as config_module
from submission import projection
from submission import profile as profile_module
from submission.cli import main as cli_main
from submission.step import RunPlan


def _profile(sides, img_per_s=100.0, *, loader=1e6, threads=2, eval_rate=200.0, setup=None,
             system="cpu", batch=64, first_step_s=None, device="cpu"):
    steps = {str(s): {"img_per_s": img_per_s(s) if callable(img_per_s) else img_per_s,
                      "first_step_s": first_step_s if first_step_s is not None else 0.0}
             for s in sides}
    profile = {"schema": 1,
               "measured": {"date": "2026-11-22", "host": "test host, 2 cores", "device": device,
                            "device_name": "test device", "torch": "2.14.1"},
               "settings": {"system": system, "recipe": "mild", "batch_per_device": batch,
                            "precision": "fp32", "amp_dtype": "fp16", "workers_per_device": threads,
                            "compile": False, "train_resolution": 32, "eval_resolution": 32},
               "train_step": steps, "eval_img_per_s": eval_rate,
               "loader": {"img_per_s": loader, "threads": threads, "resolution": 32}}
    if setup is not None:
        profile["setup_s"] = setup
    return profile


def _project(config, profile, name, dp_efficiency=None, loader_profile=None, loader_profile_name=""):
    """projection.project from hand-written profiles, read as the command reads their files."""
    loader = (None if loader_profile is None
              else profile_module.parse(loader_profile, loader_profile_name, "loader_profile"))
    return projection.project(config, profile_module.parse(profile, name), loader, dp_efficiency)


def _cpu(**overrides):
    return config_module.resolve("cpu", {k: str(v) for k, v in overrides.items()})


def test_side_schedule_follows_the_recipe():
    plan = RunPlan.of(_cpu(), 60_000)
    assert (plan.steps_per_epoch, plan.total_steps) == (937, 150)
    schedule = plan.side_runs()
    assert sum(steps for _, _, steps in schedule) == 150
    sides = [side for side, _, _ in schedule]
    assert sides[0] == 16 and sides[-1] == 32 and sides == sorted(sides)
    first_side, _, first_steps = schedule[0]
    assert first_steps >= 61                   # steps 0..60: progress <= 0.4, half size
    last_side, last_first, last_steps = schedule[-1]
    assert last_first + last_steps == 150 and last_first <= 120     # full size from 80%


def test_fixed_size_run_is_the_sum_of_its_parts():
    config = _cpu(progressive_resize="false")
    profile = _profile([32], 100.0, setup={"in_run_first_epoch_extra": 12.0, "first_eval_extra": 3.0})
    result = _project(config, profile, "test.json")
    # 60,000 images // 64 = 937 steps per epoch; 0.16 epochs -> 150 steps; eval every 37 steps
    steps, evals = 150, 5
    expected_s = steps * 64 / 100.0 + evals * 2000 / 200.0 + 15.0
    assert result.run_minutes == pytest.approx(expected_s / 60)
    assert result.campaign_minutes == pytest.approx(5 * expected_s / 60)
    assert [p.limited_by for p in result.parts] == ["step", "eval", "set-up"]
    assert result.run_cost_usd is None
    # a run that reaches the target at the evaluation of step 148 stops there: 4 evaluations
    epoch, minutes = result.early_stop
    assert epoch == pytest.approx(148 / 937)
    assert minutes == pytest.approx((148 * 64 / 100.0 + 4 * 2000 / 200.0 + 15.0) / 60)


def test_a_slow_loader_limits_the_training_rate():
    config = _cpu(progressive_resize="false")
    result = _project(config, _profile([32], 100.0, loader=40.0, threads=4), "p.json")
    train = result.parts[0]
    # 40 img/s over 4 threads, the run has min(workers_per_device 2, vCPUs) threads
    threads = min(2, projection.host_vcpus(config)[0])
    assert train.limited_by == "loader" and train.img_per_s == pytest.approx(10.0 * threads)


def test_loader_work_the_step_does_not_hide_is_added_per_image_at_every_side():
    """On a CPU the loader's threads take the step's cores: the bench's step fed by the
    loader (80 img/s) against its synthetic step (100 img/s) at 32 px costs 1/80 - 1/100 s
    more per image, at every side, since FFCV decodes at the training resolution."""
    config = _cpu()
    hidden = _project(config, _profile([16, 20, 24, 28, 32], lambda s: 3200 / s), "p.json")
    profile = _profile([16, 20, 24, 28, 32], lambda s: 3200 / s)
    profile.update(step_img_per_s=100.0, fed_step_img_per_s=80.0)
    slowed = _project(config, profile, "p.json")
    for before, after in zip(hidden.parts, slowed.parts):
        if before.limited_by == "step":
            assert after.limited_by == "step + loader"
            assert after.seconds - before.seconds == pytest.approx(before.images * (1 / 80 - 1 / 100))
        else:
            assert after.seconds == before.seconds
    assert any("per image per process: 2.5 ms at 32 px, at every side" in line for line in slowed.assumptions)
    profile.update(fed_step_img_per_s=120.0)       # fed faster than synthetic: noise, nothing added
    assert _project(config, profile, "p.json").run_minutes == hidden.run_minutes


def test_loader_work_measured_at_two_sides_is_linear_in_the_side_between_them():
    """The bench (since 2026-11-23) times the fed step in turns with the synthetic one at
    full size and at the smallest side; those pairs, not the first row timed a minute
    earlier, set the cost."""
    config = _cpu()
    sides = [16, 20, 24, 28, 32]
    hidden = _project(config, _profile(sides, lambda s: 3200 / s), "p.json")
    profile = _profile(sides, lambda s: 3200 / s)
    profile.update(step_img_per_s=10.0, fed_step_img_per_s=1.0, fed_step_by_side={
        "32": {"fed_img_per_s": 80.0, "synthetic_img_per_s": 100.0},      # 2.5 ms an image
        "16": {"fed_img_per_s": 50.0, "synthetic_img_per_s": 100.0}})     # 10 ms an image
    result = _project(config, profile, "p.json")
    expected = {16: 10e-3, 20: 8.125e-3, 24: 6.25e-3, 28: 4.375e-3, 32: 2.5e-3}
    for before, after in zip(hidden.parts, result.parts):
        if before.limited_by == "step":
            side = int(before.what.split()[1])
            assert after.seconds - before.seconds == pytest.approx(before.images * expected[side])
    # outside the measured sides, the nearer one's: measured at 20 and 32 px, 16 px pays 20's
    profile["fed_step_by_side"]["20"] = profile["fed_step_by_side"].pop("16")
    outside = _project(config, profile, "p.json")
    assert outside.parts[0].seconds - hidden.parts[0].seconds == pytest.approx(hidden.parts[0].images * 10e-3)
    assert any("per image per process: 10 ms at 16 px; 2.5 ms at 32 px, in between linear in "
               "the side (the bench's step fed by the loader against the synthetic step timed "
               "in turns with it)" in line for line in result.assumptions)


def test_eight_gpus_scale_with_the_stated_efficiency_and_price():
    config = config_module.resolve("p4d", {})
    sides = set(RunPlan.of(config, 1_281_167).sides())
    assert len(sides) == 13                     # sizes change at epoch boundaries only
    profile = _profile(sides, lambda side: 1000.0 * (176 / side) ** 2, eval_rate=1500.0,
                       system="p4d", batch=256, device="cuda", loader=8000.0, threads=8,
                       setup={"in_run_first_epoch_extra": 20.0, "first_eval_extra": 6.0})
    profile["settings"].update(precision="amp", train_resolution=176, eval_resolution=224)
    result = _project(config, profile, "p4d.json")
    assert result.processes == 8
    full = next(p for p in result.parts if p.what.startswith("train 176 px"))
    assert full.img_per_s == pytest.approx(1000.0 * 8 * projection.DEFAULT_DP_EFFICIENCY)
    assert result.run_cost_usd == pytest.approx(result.run_minutes / 60 * 32.7726)
    text = projection.format_projection(result)
    assert "data-parallel efficiency 0.9 (assumed, not measured" in text
    assert "96 vCPUs (systems/p4d.json)" in text and "AWS EC2 on-demand list price" in text
    published = [line for line in text.splitlines() if line.startswith("| *published*")]
    assert any("Mild training throughput" in line and "| 21,582 |" in line for line in published)
    assert not result.warnings, result.warnings


def test_missing_side_names_it_and_the_bench_command():
    config = _cpu()
    with pytest.raises(projection.ProfileError, match=r"side\(s\) 20, 24, 28 px.*submission bench system=cpu"):
        _project(config, _profile([16, 32]), "p.json")


def test_a_batch_larger_than_the_data_set_names_the_setting_to_lower():
    config = _cpu(batch_per_device=10_000_000)
    with pytest.raises(config_module.ConfigError,
                       match=r"60000 training images are fewer than one global batch \(10000000 = "
                             r"10000000 per process x 1 process\(es\)\): lower batch_per_device"):
        _project(config, _profile([16, 20, 24, 28, 32]), "p.json")


def test_profile_of_another_setting_is_warned_about():
    config = _cpu(progressive_resize="false")
    result = _project(config, _profile([32], batch=128, system="p4d"), "p.json")
    text = projection.format_projection(result)
    assert "batch_per_device=128" in text and "measured for system p4d" in text
    assert "no in-run set-up figures" in text


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


def test_in_run_set_up_comes_from_the_loader_probe_of_the_warm_up_setting():
    """The bench's fresh-process probe: with the warm-up, the warm loaders' first batch and
    evaluation pass; without it, the cold ones plus the first step at each side."""
    probe = {"cold": {"train_first_batch_s": 16.0, "val_first_pass_s": 1.5, "warm_up_s": 0.0},
             "warm": {"train_first_batch_s": 0.5, "val_first_pass_s": 0.1, "warm_up_s": 11.0}}
    profile = _profile([32], 100.0, first_step_s=2.64)    # 2 s more than a steady step of 64
    profile["loader_setup_s"] = probe
    warm = _project(_cpu(progressive_resize="false"), profile, "p.json")
    cold = _project(_cpu(progressive_resize="false", warmup="false"), profile, "p.json")
    assert warm.parts[-1].seconds == pytest.approx(0.6)
    assert cold.parts[-1].seconds == pytest.approx(17.5 + 2.0)
    assert "warm-up before run_start" in warm.parts[-1].what and "warmup=false" in cold.parts[-1].what
    assert not any("set-up figures" in w for w in warm.warnings)


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


def test_each_later_epoch_pays_the_loaders_start():
    """The bench's loader.epoch_start_s, once for every epoch after the first (whose start
    is in the in-run set-up), up to the step the run ends at."""
    config = _cpu(progressive_resize="false", epochs="2.5", eval_every_epochs="1")
    profile = _profile([32], 100.0)
    plain = _project(config, profile, "p.json")
    profile["loader"]["epoch_start_s"] = 1.5
    restarted = _project(config, profile, "p.json")
    assert restarted.parts[-1].limited_by == "loader" and "each of 2 later epochs" in restarted.parts[-1].what
    assert restarted.run_minutes - plain.run_minutes == pytest.approx(2 * 1.5 / 60)
    # the early stop at the evaluation of epoch 2 crossed one epoch start
    assert restarted.early_stop[1] - plain.early_stop[1] == pytest.approx(1.5 / 60)


def test_the_loops_own_work_is_added_to_every_step():
    """The bench's loop_overhead (normalise + resize, the EMA update; seconds per step)."""
    config = _cpu(progressive_resize="false")
    profile = _profile([32], 100.0)
    plain = _project(config, profile, "p.json")
    profile["loop_overhead"] = {"side": 16, "normalize_resize_s": 0.001, "ema_s": 0.003, "share_of_step": 0.01}
    looped = _project(config, profile, "p.json")
    assert looped.parts[0].seconds - plain.parts[0].seconds == pytest.approx(150 * 0.004)
    assert any("4 ms (normalising and resizing" in line for line in looped.assumptions)


H100_PROFILE = config_module.REPO_ROOT / "docs" / "gpu-h100-2026-11-22" / "profile-h100.json"
CLOUD_SYSTEMS = ("a100-80gb", "a2", "bm-gpu4", "n1-v100", "p3", "p4d")


def test_vcpus_are_derived_from_cores_and_sockets_where_the_descriptor_states_no_count():
    vcpus, said = projection.host_vcpus(config_module.resolve("a100-80gb", {}))
    stated = config_module.load_descriptor("a100-80gb")
    assert not stated["host_processor_vcpu_count"]
    assert vcpus == int(stated["host_processor_core_count"]) * int(stated["host_processors_per_node"])
    assert "1 thread per core" in said and "lower bound" in said
    assert projection.host_vcpus(config_module.resolve("p4d", {}))[0] == 96


def test_a_descriptor_naming_its_processor_without_counts_is_refused(monkeypatch):
    stated = dict(config_module.load_descriptor("p4d"), host_processor_vcpu_count="",
                  host_processor_core_count="")
    monkeypatch.setattr(projection.rates, "load_descriptor", lambda system: stated)
    with pytest.raises(config_module.ConfigError,
                       match=r"systems/p4d.json states no host_processor_vcpu_count.*fill "
                             r"host_processor_vcpu_count"):
        projection.host_vcpus(config_module.resolve("p4d", {}))


@pytest.mark.parametrize("system", CLOUD_SYSTEMS)
def test_every_cloud_system_projects_finite_minutes_from_the_shipped_h100_profile(system):
    config = config_module.resolve(system, {})
    profile = profile_module.read(H100_PROFILE)
    result = projection.project(config, profile)
    # one process's measured rate times eight, less the data-parallel efficiency: the
    # published Mild runs took 23.79 (a100-80gb) to ~30 minutes; a loader starved of
    # threads (one per GPU from a misread socket count) gave 208.9
    assert 10 < result.run_minutes < 60
    assert 10_000 < result.training_img_per_s < 40_000
    assert any("vCPUs" in line for line in result.assumptions)


# --- a CPU-bound recipe: Hot's torchvision loader, SAM and sides a Mild profile lacks -------
H100_SIDES = [88, 96, 104, 112, 116, 124, 132, 140, 148, 156, 164, 172, 176]


def _gpu_mild(sides=H100_SIDES, **changes):
    """A Mild profile of one GPU: FFCV's loader, step rates with the area of the side."""
    profile = _profile(sides, lambda side: 1000.0 * (176 / side) ** 2, eval_rate=3000.0,
                       system="local", batch=256, device="cuda", loader=4000.0, threads=12)
    profile["settings"].update(precision="amp", train_resolution=176, eval_resolution=224, **changes)
    return profile


def _torchvision_loader(per_thread=160.0, threads=2):
    """A bench of recipe=hot on a CPU host: its torchvision loader and the augmentation."""
    profile = _profile([16, 20, 24, 28, 30], 5.0, loader=per_thread * threads, threads=threads)
    profile["settings"].update(recipe="hot", sam_interval=5, train_loader="torchvision")
    profile["loader"].update(kind="torchvision", resolution=176)
    profile["measured"].update(date="2026-11-24", host="cpu host, 2 vCPUs")
    profile["augmentation_ms_per_image"] = {"decode": 0.5, "crop_flip": 1.0, "randaugment": 3.0,
                                            "to_tensor": 0.25, "total": 4.75, "images": 300}
    return profile


def _hot(system, **overrides):
    return config_module.resolve(system, {"recipe": "hot", "scale_schedule_ratio": "3",
                                          **{k: str(v) for k, v in overrides.items()}})


def test_hot_is_loader_limited_with_few_vcpus_and_step_limited_with_many():
    """160 img/s a loader thread: p4d's 96 vCPUs give 12 threads to each of its 8 GPUs
    (1,920 img/s, below the step's 2,323 at 100 px), BM.GPU4.8's 128 give 16 (2,560)."""
    loader = _torchvision_loader(per_thread=160.0)
    p4d = _project(_hot("p4d", workers_per_device=16), _gpu_mild(), "gpu.json",
                             loader_profile=loader, loader_profile_name="cpu-hot.json")
    bm = _project(_hot("bm-gpu4", workers_per_device=16), _gpu_mild(), "gpu.json",
                            loader_profile=loader, loader_profile_name="cpu-hot.json")
    p4d_train = [p for p in p4d.parts if p.what.startswith("train ")]
    bm_train = [p for p in bm.parts if p.what.startswith("train ")]
    assert any(p.limited_by == "loader" for p in p4d_train)
    assert all(p.img_per_s == pytest.approx(160.0 * 12 * 8) for p in p4d_train if p.limited_by == "loader")
    assert all(p.limited_by == "step" for p in bm_train)
    assert bm.training_img_per_s > p4d.training_img_per_s
    p4d_text, bm_text = projection.format_projection(p4d), projection.format_projection(bm)
    assert "Where the loader limits:" in p4d_text and "x 12 threads per process x 8 processes" in p4d_text
    assert "loader-limited: none of the" in bm_text and "x 16 threads per process" in bm_text
    assert "against the published Hot 9,225 img/s" in p4d_text
    assert "against the published Hot 14,388 img/s" in bm_text
    assert "| *published* Hot training throughput" in p4d_text and "| 9,225 |" in p4d_text
    assert "from loader_profile cpu-hot.json: measured 2026-11-24 on cpu host, 2 vCPUs" in p4d_text
    assert "RandAugment 3 ms" in p4d_text and "= 4.75 ms" in p4d_text
    # the same loader with the recipe's own 8 workers: loader-limited on both
    default = _project(_hot("bm-gpu4"), _gpu_mild(), "gpu.json", loader_profile=loader,
                                 loader_profile_name="cpu-hot.json")
    assert any(p.limited_by == "loader" for p in default.parts)


def test_sam_passes_scale_the_step_time_of_another_recipes_profile():
    """Hot's SAM every 5th step: 1.2 passes a step; a Mild profile's step times x 1.2, a
    Medium one's (1 in 10) x 1.2 / 1.1, a Hot one's as measured."""
    config = _hot("bm-gpu4", workers_per_device=16)
    sides = sorted(set(RunPlan.of(config, 1_281_167).sides()))
    fast_loader = _torchvision_loader(per_thread=1e6)

    def training_s(**settings):
        result = _project(config, _gpu_mild(sides, **settings), "gpu.json",
                                    loader_profile=fast_loader, loader_profile_name="l.json")
        assert all(p.limited_by == "step" for p in result.parts if p.what.startswith("train "))
        return sum(p.seconds for p in result.parts if p.what.startswith("train ")), result

    mild, result = training_s()
    hot, _ = training_s(recipe="hot", sam_interval=5)
    medium, _ = training_s(recipe="medium", sam_interval=10)
    assert mild / hot == pytest.approx(1.2)
    assert medium / hot == pytest.approx(1.2 / 1.1)
    assert any("step time x 1.2 for SAM" in line for line in result.assumptions)


def test_sides_a_mild_profile_lacks_are_interpolated_between_their_neighbours():
    loader = _torchvision_loader(per_thread=1e6)
    result = _project(_hot("p4d"), _gpu_mild(), "gpu.json", loader_profile=loader,
                                loader_profile_name="l.json")
    per_side = {int(p.what.split()[1]): p.img_per_s for p in result.parts if p.what.startswith("train ")}
    assert 100 in per_side and 167 in per_side

    def rate(side):          # the profile's per-process rate as projected: 8 GPUs, 0.9, SAM
        return 1000.0 * (176 / side) ** 2 * 8 * 0.9 / 1.2

    for side, (low, high) in {100: (96, 104), 108: (104, 112), 120: (116, 124), 167: (164, 172)}.items():
        assert rate(high) < per_side[side] < rate(low), side
    assert per_side[104] == pytest.approx(rate(104))                # measured: as measured
    text = projection.format_projection(result)
    assert "167 px between 164 and 172 px, linear in the area" in text
    # 100 and 104 px are more than 10% below a profile measured from 120 px: not inferred (108 is 10%)
    with pytest.raises(projection.ProfileError, match=r"side\(s\) 100, 104 px, .*more than 10% outside its measured 120-176 px"):
        _project(_hot("p4d"), _gpu_mild([120, 140, 176]), "gpu.json",
                           loader_profile=loader, loader_profile_name="l.json")


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
    assert ("`python -m submission bench recipe=hot scale_schedule_ratio=3 json=loader-hot.json`"
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
    assert "`python -m submission bench recipe=mild json=loader-mild.json`" in err
    # the right kind projects, and says where the loader figures come from
    cpu.write_text(json.dumps(_torchvision_loader()))
    assert cli_main(["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3",
                     f"profile={gpu}", f"loader_profile={cpu}"]) == 0
    out = capsys.readouterr().out
    assert f"from loader_profile {cpu}" in out and "Where the loader limits:" in out


# --- the errors of profile= and loader_profile=: the option, the file, the command ---------
HOT = ["project", "system=p4d", "recipe=hot", "scale_schedule_ratio=3"]
HOT_LOADER_BENCH = "`python -m submission bench recipe=hot scale_schedule_ratio=3 json=loader-hot.json`"
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
            "newer.json": "is a schema-3 bench profile, newer than this harness reads (schema 2 and older)",
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


def test_a_projection_reads_as_numbers():
    """What a later `tradeoff` reads: parts by kind, run, training and evaluation minutes, cost."""
    config = _cpu(progressive_resize="false", price_usd_per_hour="6")
    profile = _profile([32], 100.0, setup={"in_run_first_epoch_extra": 12.0, "first_eval_extra": 3.0})
    result = _project(config, profile, "p.json")
    assert [p.kind for p in result.parts] == ["training", "evaluation", "set-up"]
    assert result.parts[0].side == 32
    assert result.training_minutes == pytest.approx(150 * 64 / 100.0 / 60)
    assert result.evaluation_minutes == pytest.approx(5 * 2000 / 200.0 / 60)
    assert result.run_minutes == pytest.approx(result.training_minutes + result.evaluation_minutes + 15 / 60)
    assert result.run_cost_usd == pytest.approx(result.run_minutes / 60 * 6)
