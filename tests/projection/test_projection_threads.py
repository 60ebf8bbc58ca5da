"""The loader's threads in a projection: the run's count by the rule a campaign applies (from the
descriptor's vCPUs), its rate along the profile's thread sweep (flat beyond it, or by a stated
share), and the one line that says what more threads would buy."""
from __future__ import annotations

import pytest

from submission import bench_profile as profile_module
from submission import config as config_module
from submission import projection

from hand_profiles import _gpu_mild, _project

# p4d: 96 vCPUs for 8 GPUs, 12 a process; the step of _gpu_mild per process (x 0.9 for 8 processes)
P4D_PROCESSES = 8


def _swept(rates: dict[int, float], cpus: int = 16) -> dict:
    """A one-GPU Mild profile whose bench swept FFCV's threads (img/s at each count)."""
    profile = _gpu_mild()
    profile["loader"].update(img_per_s=rates[max(rates)], threads=max(rates))
    profile["loader_sweep"] = {"kind": "ffcv", "cpus": cpus, "resolution": 176,
                               "by_threads": {str(t): {"img_per_s": r} for t, r in rates.items()}}
    return profile


def _loader_rate(result) -> float:
    """The whole system's loader rate, where it limits a training part."""
    rates = {p.img_per_s for p in result.parts if p.limited_by == "loader" and p.side is not None}
    assert len(rates) == 1, rates
    return rates.pop()


def _p4d(**overrides):
    return config_module.resolve("p4d", {k: str(v) for k, v in overrides.items()})


def test_the_loader_follows_the_sweep_and_is_flat_beyond_it():
    profile = _swept({1: 100.0, 2: 190.0, 4: 340.0, 8: 400.0})      # bends: 400, not 800, at 8
    at = {threads: _loader_rate(_project(_p4d(workers_per_device=threads), profile, "swept.json"))
          for threads in (1, 3, 8, 12)}
    assert at[1] == pytest.approx(100.0 * P4D_PROCESSES)
    assert at[3] == pytest.approx((190.0 + (340.0 - 190.0) / 2) * P4D_PROCESSES)    # between 2 and 4
    assert at[8] == pytest.approx(400.0 * P4D_PROCESSES)
    assert at[12] == pytest.approx(400.0 * P4D_PROCESSES)                           # flat beyond 8
    # the rule's own count: 96 vCPUs / 8 processes - 1 for the step's thread
    derived = _project(_p4d(), profile, "swept.json")
    assert _loader_rate(derived) == pytest.approx(400.0 * P4D_PROCESSES)
    text = projection.format_projection(derived)
    assert ("loader threads per process: 11 (derived: 96 vCPUs (systems/p4d.json) / 8 process(es) - 1 "
            "for the step's thread) (5 of them beyond the 6 physical cores a process has: on hyperthreads)"
            in text)
    assert ("400 img/s a process along the profile's thread sweep (1: 100, 2: 190, 4: 340, 8: 400 img/s at "
            "each count, on 16 CPUs); each thread beyond its 8 adds nothing (flat) (assumed, not measured: a "
            "sweep stops at its host's CPUs" in text)
    # a share stated for the threads beyond the sweep: each adds half of the 8th count's rate per thread
    stated = projection.project(_p4d(), profile_module.parse(profile, "swept.json"), beyond=0.5)
    assert _loader_rate(stated) == pytest.approx(400.0 * (1 + 0.5 * 3 / 8) * P4D_PROCESSES)
    assert "(stated: beyond_measured_threads;" in projection.format_projection(stated)


def test_a_profile_without_a_sweep_scales_its_one_count_linearly_and_says_so():
    profile = _gpu_mild()
    profile["loader"].update(img_per_s=400.0, threads=8)
    result = _project(_p4d(), profile, "old.json")
    assert _loader_rate(result) == pytest.approx(50.0 * 11 * P4D_PROCESSES)
    assert ("along the profile's loader row (8: 400 img/s; no thread sweep in the profile); each thread beyond "
            "its 8 adds as much as each measured one did (linear) (assumed, not measured: the profile has no "
            "sweep; `bench json=FILE` records one" in projection.format_projection(result))
    flat = projection.project(_p4d(), profile_module.parse(profile, "old.json"), beyond=0.0)
    assert _loader_rate(flat) == pytest.approx(400.0 * P4D_PROCESSES)


def test_the_line_names_the_threads_that_would_lift_the_loader_and_the_minutes_then():
    profile = _swept({1: 400.0, 2: 800.0, 4: 1600.0, 8: 3200.0, 12: 4000.0})
    four = _project(_p4d(workers_per_device=4), profile, "swept.json")
    # the step at 88 px: 1000 x (176/88)^2 x 0.9 = 3,600 img/s a process; 3,200 + 200 a thread past 8
    ten = _project(_p4d(workers_per_device=10), profile, "swept.json")
    assert four.loader_lift == (
        "the loader limits 6 training part(s) at 4 threads per process; 10 would lift every one (3,600 img/s "
        f"a process against the step's 3,600 at its fastest loader-limited side): {ten.run_minutes:.3f} min "
        "a run with workers_per_device=10")
    assert ten.run_minutes < four.run_minutes and not ten.loader_lift      # lifted: no line
    assert f"Loader threads: {four.loader_lift}." in projection.format_projection(four)


def test_the_line_says_when_no_count_the_host_has_would_lift_it():
    profile = _swept({1: 100.0, 2: 200.0, 4: 300.0, 8: 400.0})
    result = _project(_p4d(workers_per_device=4), profile, "swept.json")
    assert result.loader_lift.startswith(
        "the loader limits 13 training part(s) at 4 threads per process, and no thread count this host has "
        "(12 a process at most) would lift every one: the step needs 3,600 img/s a process at its fastest "
        "loader-limited side; at 8 (400 img/s a process) a run would take ")
    flat = _project(_p4d(workers_per_device=8), profile, "swept.json")      # flat beyond 8: nothing to gain
    assert flat.loader_lift.endswith("at its fastest loader-limited side")


def test_a_sweep_in_a_profile_is_checked_as_every_figure_is():
    profile = _swept({1: 100.0, 8: 400.0})
    assert profile_module.parse(profile, "swept.json").loader_sweep.img_per_s == {1: 100.0, 8: 400.0}
    profile["loader_sweep"]["by_threads"]["x2"] = {"img_per_s": 1.0}
    profile["loader_sweep"]["by_threads"]["4"] = {"img_per_s": -1.0}
    with pytest.raises(profile_module.ProfileError) as error:
        profile_module.parse(profile, "swept.json")
    assert "loader_sweep.by_threads key 'x2' is not a whole number of threads" in str(error.value)
    assert "loader_sweep.by_threads.4.img_per_s is -1.0, not a number above 0" in str(error.value)


def test_a_sweep_is_written_and_read_back_as_it_was():
    swept = profile_module.parse(_swept({1: 100.0, 2: 190.0, 16: 900.0}), "swept.json")
    data = profile_module.to_json(swept)
    assert data["loader_sweep"]["by_threads"] == {"1": {"img_per_s": 100.0}, "2": {"img_per_s": 190.0},
                                                  "16": {"img_per_s": 900.0}}
    assert profile_module.parse(data, "again.json").loader_sweep == swept.loader_sweep
