"""submission.bench_profile: the bench profile's one type, each field declared with its check, its
writer and its reader."""
from __future__ import annotations

import dataclasses
import json

import pytest

from submission import bench_profile as profile_module
from submission.bench.measure import measured
from submission.bench_profile import (
    BenchProfile,
    FedStep,
    Loader,
    LoaderBeside,
    LoaderProbe,
    LoaderSetup,
    LoopOverhead,
    ProfileError,
    SetupExtra,
    SideStep,
    parse,
    read,
    recorded_settings,
    write,
)
from submission.config import resolve
from submission.projection import rates

from conftest import REPO


def test_a_schema_1_profile_is_refused_saying_what_to_do():
    """Schema 1 (2026-11-22/23) was converted once, in the shipped files; its reader is gone."""
    data = {"schema": 1, "measured": {}, "settings": {}, "train_step": {"32": {"img_per_s": 1.0}},
            "eval_img_per_s": 1.0, "loader": {"img_per_s": 1.0, "threads": 1}}
    with pytest.raises(ProfileError, match=r"old.json is a schema-1 bench profile .* measure it again"):
        parse(data, "old.json")


def test_the_shipped_profiles_are_schema_2_and_read_as_before():
    h100 = read(REPO / "docs" / "gpu-h100-2026-11-22" / "profile-h100.json")
    assert h100.loader == Loader("ffcv", 4296.237316060406, 12, 176) and h100.sam_interval == 0
    # the one fed step the bench measured then: at full size, against its first row
    assert h100.fed_step_by_side == {176: FedStep(6108.55037179857, 6321.601286694789, in_turns=False)}
    # its loader alone (4,296 img/s) is slower than the fed step: the loader's limit, counted
    # apart, so feeding adds nothing to the step itself
    assert rates.loader_costs(h100) == {176: 0.0}
    hot = read(REPO / "docs" / "projection-hot-loader-cpu.json")
    assert hot.loader.kind == "torchvision" and hot.sam_interval == 5
    # written before the compiled step was fed: none measured, as in an eager bench's
    assert h100.compiled_fed_step_by_side is None is hot.compiled_fed_step_by_side


def test_a_profile_of_the_bench_before_the_compiled_step_was_fed_reads_without_it():
    """A profile with a loader beside, written before `compiled_fed_step_by_side` was declared."""
    data = profile_module.to_json(_profile(resolve("cpu", {})))
    del data["compiled_fed_step_by_side"], data["loader_beside"]["compiled_fed_step_by_side"]
    older = parse(data, "older.json")
    assert older.compiled_fed_step_by_side is None is older.loader_beside.compiled_fed_step_by_side
    assert older.loader_beside.fed_step_by_side == {32: FedStep(98.0, 99.0, in_turns=True)}


def test_a_v2_profile_written_and_read_back_is_the_same(tmp_path):
    shipped = read(REPO / "docs" / "projection-hot-loader-cpu.json")
    path = tmp_path / "profile.json"
    write(shipped, path)
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and data["loader"]["kind"] == "torchvision"
    assert data["fed_step_by_side"]["167"]["in_turns"] is True
    assert data["loader"]["img_per_s_per_thread"] == pytest.approx(438.70538508499004 / 2)
    assert "null" not in path.read_text()          # a figure not measured is left out
    again = read(path)
    assert again == shipped and again.file == str(path)
    assert again.augmentation_ms_per_image.source == "train-1f8fa8ab2afef2bb.beton (600 images)"


def _profile(config):
    """What bench.measure.measure returns, its parts by hand."""
    probe = LoaderProbe(warm_up_s=0.0, build_s=0.5, epoch_start_s=0.1, train_first_batch_s=2.0, val_first_pass_s=1.0)
    return BenchProfile(
        measured=measured(config, 10, 3), settings=recorded_settings(config),
        train_step={16: SideStep(img_per_s=300.0, first_step_s=0.4), 32: SideStep(img_per_s=100.0, first_step_s=0.9)},
        eval_img_per_s=250.0,
        loader=Loader(kind="ffcv", img_per_s=800.0, threads=config.workers_per_device, resolution=32,
                      epoch_start_s=0.2, host_s_per_batch=0.04),
        fed_step_by_side={32: FedStep(90.0, 99.0, in_turns=True), 16: FedStep(250.0, 290.0, in_turns=True)},
        compiled_fed_step_by_side={32: FedStep(110.0, 130.0, in_turns=True), 16: FedStep(280.0, 400.0, True)},
        loader_beside=LoaderBeside(
            loader=Loader(kind="device", img_per_s=3000.0, threads=2, resolution=32, epoch_start_s=0.1,
                          device_memory_bytes=1_500_000, torch_ops_per_batch=18, host_s_per_batch=0.003,
                          device_part_s_per_batch=0.001),
            fed_step_by_side={32: FedStep(98.0, 99.0, in_turns=True)}, eval_img_per_s=400.0,
            compiled_fed_step_by_side={32: FedStep(120.0, 130.0, in_turns=True), 16: FedStep(300.0, 400.0, True)}),
        setup_s=SetupExtra(first_eval_extra=1 / 200 - 1 / 250),
        loader_setup_s=LoaderSetup(cold=probe, warm=dataclasses.replace(probe, warm_up_s=3.0)),
        loop_overhead=LoopOverhead(side=16, normalize_resize_s=0.002, ema_s=0.001, share_of_step=0.05),
        eval_forward_img_per_s=500.0, step_img_per_s=100.0, plain_loop_img_per_s=120.0,
        mfu={"flops_per_image": 1e9, "peak_flops": 1e11, "dtype": "torch.float32", "mfu": 0.2})


def test_the_bench_writes_version_2_with_every_figure_it_measured(tmp_path):
    config = resolve("cpu", {})
    written = _profile(config)
    data = profile_module.to_json(written)
    assert data["schema"] == 2 and set(data["settings"]) == set(profile_module.RECORDED_SETTINGS)
    assert data["settings"]["system"] == "cpu" and data["settings"]["sam_interval"] == 0
    assert data["measured"]["steps"] == 10 and data["measured"]["rounds"] == 3
    assert data["measured"]["pillow"].split()[0] in ("Pillow", "Pillow-SIMD")     # which ran, and its version
    assert data["train_step"]["16"] == {"img_per_s": 300.0, "first_step_s": 0.4}
    assert data["fed_step_by_side"]["16"] == {"fed_img_per_s": 250.0, "synthetic_img_per_s": 290.0,
                                              "in_turns": True}
    assert data["loader"] == {"kind": "ffcv", "img_per_s": 800.0, "threads": config.workers_per_device,
                              "resolution": 32, "epoch_start_s": 0.2, "host_s_per_batch": 0.04,
                              "img_per_s_per_thread": 800.0 / config.workers_per_device}
    assert data["setup_s"] == {"first_eval_extra": pytest.approx(1 / 200 - 1 / 250)}
    assert data["loader_setup_s"]["warm"]["warm_up_s"] == 3.0 and data["mfu"]["mfu"] == 0.2
    for key, value in (("eval_img_per_s", 250.0), ("eval_forward_img_per_s", 500.0),
                       ("step_img_per_s", 100.0), ("plain_loop_img_per_s", 120.0)):
        assert data[key] == value, key
    assert data["loop_overhead"]["share_of_step"] == 0.05 and "compiled" not in data
    assert data["loader_beside"] == {
        "loader": {"kind": "device", "img_per_s": 3000.0, "threads": 2, "resolution": 32, "epoch_start_s": 0.1,
                   "device_memory_bytes": 1_500_000, "torch_ops_per_batch": 18, "host_s_per_batch": 0.003,
                   "device_part_s_per_batch": 0.001},
        "fed_step_by_side": {"32": {"fed_img_per_s": 98.0, "synthetic_img_per_s": 99.0, "in_turns": True}},
        "eval_img_per_s": 400.0,
        "compiled_fed_step_by_side": {"32": {"fed_img_per_s": 120.0, "synthetic_img_per_s": 130.0, "in_turns": True},
                                      "16": {"fed_img_per_s": 300.0, "synthetic_img_per_s": 400.0, "in_turns": True}}}
    assert data["compiled_fed_step_by_side"]["16"] == {"fed_img_per_s": 280.0, "synthetic_img_per_s": 400.0,
                                                       "in_turns": True}
    path = tmp_path / "p.json"
    write(written, path)
    assert read(path) == written


@pytest.mark.parametrize("change, field", [
    (lambda p: p["loader"].pop("kind"), "loader.kind is missing, not one of ffcv, torchvision, device"),
    (lambda p: p["loader_beside"]["loader"].update(threads=0), "loader_beside.loader.threads is 0, not a whole"),
    (lambda p: p["loader"].update(kind="dali"), 'loader.kind is "dali", not one of'),
    (lambda p: p["settings"].pop("sam_interval"), "settings.sam_interval is missing"),
    (lambda p: p["fed_step_by_side"]["32"].pop("in_turns"), "fed_step_by_side.32.in_turns is missing"),
    (lambda p: p["fed_step_by_side"]["32"].update(in_turns=1), "fed_step_by_side.32.in_turns is 1, not true or false"),
    (lambda p: p["train_step"]["16"].pop("first_step_s"), "train_step.16.first_step_s is missing"),
    (lambda p: p.pop("fed_step_by_side"), "fed_step_by_side is missing"),
    (lambda p: p["compiled_fed_step_by_side"]["16"].pop("synthetic_img_per_s"),
     "compiled_fed_step_by_side.16.synthetic_img_per_s is missing"),
    (lambda p: p["loader_beside"]["compiled_fed_step_by_side"]["32"].update(fed_img_per_s=0),
     "loader_beside.compiled_fed_step_by_side.32.fed_img_per_s is 0, not a number above 0"),
    (lambda p: p["train_step"].update({"x16": {"img_per_s": 1.0, "first_step_s": 0.0}}),
     "train_step side 'x16' is not a whole number of px"),
    (lambda p: p["loop_overhead"].pop("ema_s"), "loop_overhead.ema_s is missing"),
    (lambda p: p["measured"].update(rounds=0), "measured.rounds is 0, not a whole number above 0"),
])
def test_a_damaged_v2_field_is_named(change, field):
    data = profile_module.to_json(_profile(resolve("cpu", {})))
    change(data)
    with pytest.raises(ProfileError) as raised:
        parse(data, "l.json", "loader_profile", "measure it")
    message = str(raised.value)
    assert message.startswith("loader_profile l.json is not a bench profile the projection can use: ")
    assert field in message and message.endswith("; measure it")
