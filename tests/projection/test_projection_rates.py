"""submission.projection.rates: the rate of each side from the step, the loader and its
threads (the host's vCPUs), the loop's own work, data parallelism, SAM's passes and
sides a profile lacks."""
from __future__ import annotations

import dataclasses

import pytest

from submission import bench_profile as profile_module
from submission import config as config_module
from submission import projection, system_descriptor
from submission.run_plan import RunPlan

from hand_profiles import H100_SIDES, _cpu, _gpu_mild, _profile, _project, _torchvision_loader


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
    profile["fed_step_by_side"] = {"32": {"fed_img_per_s": 80.0, "synthetic_img_per_s": 100.0, "in_turns": False}}
    slowed = _project(config, profile, "p.json")
    for before, after in zip(hidden.parts, slowed.parts):
        if before.limited_by == "step":
            assert after.limited_by == "step + loader"
            assert after.seconds - before.seconds == pytest.approx(before.images * (1 / 80 - 1 / 100))
        else:
            assert after.seconds == before.seconds
    assert any("per image per process: 2.5 ms at 32 px, at every side" in line for line in slowed.assumptions)
    profile["fed_step_by_side"]["32"]["fed_img_per_s"] = 120.0     # fed faster than synthetic: noise, nothing added
    assert _project(config, profile, "p.json").run_minutes == hidden.run_minutes


def test_loader_work_measured_at_two_sides_is_linear_in_the_side_between_them():
    """The bench (since 2026-11-23) times the fed step in turns with the synthetic one at
    full size and at the smallest side; those pairs, not the first row timed a minute
    earlier, set the cost."""
    config = _cpu()
    sides = [16, 20, 24, 28, 32]
    hidden = _project(config, _profile(sides, lambda s: 3200 / s), "p.json")
    profile = _profile(sides, lambda s: 3200 / s)
    profile.update(step_img_per_s=10.0, fed_step_by_side={
        "32": {"fed_img_per_s": 80.0, "synthetic_img_per_s": 100.0, "in_turns": True},   # 2.5 ms an image
        "16": {"fed_img_per_s": 50.0, "synthetic_img_per_s": 100.0, "in_turns": True}})  # 10 ms an image
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


def test_the_loops_own_work_is_added_to_every_step():
    """The bench's loop_overhead (normalise + resize, the EMA update; seconds per step)."""
    config = _cpu(progressive_resize="false")
    profile = _profile([32], 100.0)
    plain = _project(config, profile, "p.json")
    profile["loop_overhead"] = {"side": 16, "normalize_resize_s": 0.001, "ema_s": 0.003, "share_of_step": 0.01}
    looped = _project(config, profile, "p.json")
    assert looped.parts[0].seconds - plain.parts[0].seconds == pytest.approx(150 * 0.004)
    assert any("4 ms (normalising and resizing" in line for line in looped.assumptions)


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


H100_PROFILE = config_module.REPO_ROOT / "docs" / "gpu-h100-2026-11-22" / "profile-h100.json"
CLOUD_SYSTEMS = tuple(s for s in system_descriptor.available_systems() if s not in ("cpu", "local"))


def test_vcpus_are_derived_from_cores_and_sockets_where_the_descriptor_states_no_count():
    vcpus, said = projection.host_vcpus(config_module.resolve("a100-80gb", {}))
    stated = config_module.load_descriptor("a100-80gb")
    assert not stated.host_vcpus
    assert vcpus == stated.host_processor_core_count * stated.host_processors_per_node
    assert "1 thread per core" in said and "lower bound" in said
    assert projection.host_vcpus(config_module.resolve("p4d", {}))[0] == 96


def test_a_descriptor_naming_its_processor_without_counts_is_refused():
    p4d = config_module.resolve("p4d", {})
    stated = p4d.descriptor.replaced(host_processor_vcpu_count="", host_processor_core_count="")
    with pytest.raises(config_module.ConfigError,
                       match=r"systems/p4d.json states no host_processor_vcpu_count.*fill "
                             r"host_processor_vcpu_count"):
        projection.host_vcpus(dataclasses.replace(p4d, descriptor=stated))


@pytest.mark.parametrize("system", CLOUD_SYSTEMS)
def test_every_cloud_system_projects_finite_minutes_from_the_shipped_h100_profile(system):
    config = config_module.resolve(system, {})
    profile = profile_module.read(H100_PROFILE)
    result = projection.project(config, profile)
    # one process's measured rate times eight, less the data-parallel efficiency: the
    # published Mild runs took 23.79 (a100-80gb) to ~30 minutes; a loader starved of
    # threads (one per GPU from a misread socket count) gave 208.9
    assert 10 < result.run_minutes < 60
    # at most the step's own rate: 8 processes x the H100's fastest side x 0.9
    fastest = max(side.img_per_s for side in profile.train_step.values())
    assert 10_000 < result.training_img_per_s <= fastest * 8 * 0.9 + 1
    assert any("vCPUs" in line for line in result.assumptions)


# --- a CPU-bound recipe: Hot's torchvision loader, SAM and sides a Mild profile lacks -------
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
    assert "Where the loader limits:" in p4d_text and "1,920.0 img/s per process at 12 threads" in p4d_text
    assert "loader-limited: none of the" in bm_text and "per process at 16 threads" in bm_text
    # workers_per_device=16 does not fit p4d's 12 vCPUs a process: projected at 12, and said
    assert "loader threads per process: 12, what fits: a campaign would refuse workers_per_device" in p4d_text
    assert "against the published Hot 9,225 img/s" in p4d_text
    assert "against the published Hot 14,388 img/s" in bm_text
    assert "| *published* Hot training throughput" in p4d_text and "| 9,225 |" in p4d_text
    assert "from loader_profile cpu-hot.json: measured 2026-11-24 on cpu host, 2 vCPUs" in p4d_text
    assert "RandAugment 3 ms" in p4d_text and "= 4.75 ms" in p4d_text
    # the same loader with 8 workers: loader-limited on both
    default = _project(_hot("bm-gpu4", workers_per_device=8), _gpu_mild(), "gpu.json", loader_profile=loader,
                       loader_profile_name="cpu-hot.json")
    assert any(p.limited_by == "loader" for p in default.parts)


def test_the_loader_work_names_the_augmentation_the_bench_ran():
    """A loader profile of Hot with TrivialAugment in place of RandAugment: the projection's
    CPU-work line names what ran, not RandAugment."""
    loader = _torchvision_loader(per_thread=160.0)
    loader["augmentation_ms_per_image"]["augmentation"] = "TrivialAugment (wide)"
    text = projection.format_projection(_project(_hot("p4d"), _gpu_mild(), "gpu.json", loader_profile=loader,
                                                 loader_profile_name="cpu-hot.json"))
    assert "TrivialAugment (wide) 3 ms" in text and "RandAugment 3 ms" not in text


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
    with pytest.raises(projection.ProfileError,
                       match=r"side\(s\) 100, 104 px, .*more than 10% outside its measured 120-176 px"):
        _project(_hot("p4d"), _gpu_mild([120, 140, 176]), "gpu.json",
                           loader_profile=loader, loader_profile_name="l.json")


def test_the_device_loaders_rate_is_taken_per_process_not_scaled_by_its_threads():
    """The device loader decodes on the GPU: 2,000 img/s measured with 4 gathering threads is
    2,000 per process on p4d however many threads its vCPUs would give (FFCV's would scale)."""
    device = _gpu_mild(train_loader="device")
    device["loader"].update(kind="device", img_per_s=2000.0, threads=4)
    config = config_module.resolve("p4d", {"train_loader": "device", "workers_per_device": "12"})
    result = _project(config, device, "device.json")
    train = [p for p in result.parts if p.what.startswith("train ")]
    assert max(p.img_per_s for p in train) == pytest.approx(2000.0 * 8)
    assert any(p.limited_by == "loader" for p in train)
    text = projection.format_projection(result)
    assert "the device loader: 2,000 img/s per process, as the profile measured it" in text
    ffcv = _gpu_mild()
    ffcv["loader"].update(img_per_s=2000.0, threads=4)
    scaled = _project(config_module.resolve("p4d", {"workers_per_device": "12"}), ffcv, "ffcv.json")
    scaled_train = [p for p in scaled.parts if p.what.startswith("train ")]     # 500 x 12 threads x 8
    assert all(p.limited_by != "loader" for p in scaled_train) and max(p.img_per_s for p in scaled_train) > 2000.0 * 8


def _compiled_mild(eager_sides=(88, 176)):
    """A quick compiled bench of Mild on one GPU: the compiled step at 88 and 176 px (4x and 2x
    the eager step there), the eager step at `eager_sides`."""
    profile = _gpu_mild(list(eager_sides), compile=True, cuda_graphs=True)
    eager = {side: 1000.0 * (176 / side) ** 2 for side in (88, 176)}
    profile["compiled"] = {"88": {"img_per_s": 4 * eager[88], "eager_img_per_s": eager[88], "first_step_s": 40.0},
                           "176": {"img_per_s": 2 * eager[176], "eager_img_per_s": eager[176],
                                   "first_step_s": 45.0},
                           "side_changes": {"176->88": {"lost_s": 0.01}}}
    return profile


def test_a_compiled_profiles_sides_in_between_follow_the_eager_shape_else_the_area():
    """The compiled step is projected from its own rows; a side between its two follows the
    eager step's cost per image where an eager profile of all the sides sits beside it (here a
    step that costs as much at 96 px as at 88), else the area (FLOPs per image scale with side^2)."""
    config = config_module.resolve("p4d", {})
    plan = RunPlan.of(config, 1_281_167)
    assert {88, 96, 132, 176} <= set(plan.sides())
    compiled = profile_module.parse(_compiled_mild(), "compiled.json")
    flat_start = _gpu_mild()
    flat_start["train_step"]["96"]["img_per_s"] = flat_start["train_step"]["88"]["img_per_s"]
    beside = profile_module.parse(flat_start, "eager.json")
    fast, slow = 1 / (4 * 1000.0 * 4), 1 / (2 * 1000.0)          # compiled s/image at 88 and 176 px

    by_area = projection.rates.step_times(config, plan, compiled)
    assert by_area.compiled and by_area.cuda_graphs and by_area.measured_sides == (88, 176)
    assert by_area.seconds[88] == pytest.approx(fast) and by_area.seconds[176] == pytest.approx(slow)
    assert by_area.seconds[132] == pytest.approx(fast + (slow - fast) * (132 ** 2 - 88 ** 2) / (176 ** 2 - 88 ** 2))
    assert by_area.inferred[132] == "between 88 and 176 px, linear in the area"

    along = projection.rates.step_times(config, plan, compiled, eager_beside=beside)
    assert along.seconds[96] == pytest.approx(fast)                 # no dearer than 88 px in the eager step
    eager = {side: (side / 176) ** 2 / 1000.0 for side in (88, 132, 176)}
    share = (eager[132] - eager[88]) / (eager[176] - eager[88])
    assert along.seconds[132] == pytest.approx(fast + (slow - fast) * share)
    assert "along the eager step's cost per image (the eager profile eager.json beside it)" in along.inferred[132]
    # a full compiled bench measured the eager step at every side itself: an eager run is
    # projected from it, a compiled one (compile=true) from its compiled rows along its own shape
    own = profile_module.parse(_compiled_mild(H100_SIDES), "full.json")
    eager_run = projection.rates.step_times(config, plan, own, eager_beside=beside)
    assert not eager_run.compiled and not eager_run.inferred and eager_run.seconds[88] == pytest.approx(1 / 4000.0)
    compiling = config_module.resolve("p4d", {"compile": "true"})
    assert "the eager step measured in the same bench" in projection.rates.step_times(
        compiling, plan, own, eager_beside=beside).inferred[132]
