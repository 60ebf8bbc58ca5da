"""submission.projection.text: what the printed projection warns about."""
from __future__ import annotations

import pytest

from submission import bench_profile as profile_module
from submission import config as config_module
from submission import projection

from hand_profiles import _cpu, _profile, _project


def test_profile_of_another_setting_is_warned_about():
    config = _cpu(progressive_resize="false")
    result = _project(config, _profile([32], batch=128, system="p4d"), "p.json")
    text = projection.format_projection(result)
    assert "batch_per_device=128" in text and "measured for system p4d" in text
    assert "no in-run set-up figures" in text


def test_energy_is_projected_from_the_profiles_measured_watts_and_never_without_them():
    config = _cpu(progressive_resize="false")
    profile = _profile([32])
    without = _project(config, profile, "p.json")
    assert without.run_kwh is None
    assert "Energy: not projected: the profile holds no power figures" in projection.format_projection(without)
    measured = {**profile, "power": {"watts": 300.0, "joules_per_image": 3.0, "seconds": 4.0, "side": 32,
                                     "source": "RAPL package-0", "idle_watts": 40.0}}
    result = _project(config, measured, "p.json")
    assert result.run_kwh == pytest.approx(300.0 * result.run_minutes * 60 / 3.6e6)
    assert result.campaign_kwh == pytest.approx(result.run_kwh * result.runs)
    text = projection.format_projection(result)
    assert f"Energy: {result.run_kwh:.4g} kWh per run" in text and "300 W per process" in text
    unmeasured = {**profile, "power": {"not_measured": "RAPL: no powercap"}}
    assert ("not projected: the profile's power was not measured (RAPL: no powercap)"
            in projection.format_projection(_project(config, unmeasured, "p.json")))



H200_PROFILE = config_module.REPO_ROOT / "docs" / "qualify-h200-2026-11-26-981969e" / "profile_mild.json"
MLPERF_MINUTES = {"NVIDIA H200": ["12.078"], "NVIDIA H100 80GB HBM3": ["13.579", "13.819", "13.326"]}


@pytest.mark.parametrize("system", ["p5en", "a3-ultra", "nd-h200-v5", "p5", "a3", "nd-h100-v5"])
def test_the_h200_profile_projects_h200_systems_as_its_own_gpu_and_h100_systems_with_a_warning(system):
    config = config_module.resolve(system, {})
    result = projection.project(config, profile_module.read(H200_PROFILE))
    text = projection.format_projection(result)
    gpu = config.descriptor.accelerator_model_name
    device_warnings = [w for w in result.warnings if "measured for system local on NVIDIA H200" in w]
    if gpu == "NVIDIA H200":
        assert not device_warnings, result.warnings
        assert f"NVIDIA H200 is {system}'s GPU, so its rates are taken as {system}'s" in text
    else:
        assert device_warnings and f"not on {system}'s {gpu}" in device_warnings[0]
    # the MLPerf closed-division records on the same GPUs, beside the projection, marked
    another = [line for line in text.splitlines() if line.startswith("| *published*, *another recipe*")]
    assert [line.rsplit("|", 2)[1].strip() for line in another] == MLPERF_MINUTES[gpu]
    assert "LARS at global batch 3200" in text and "not joined to it" in text
    assert "kWh per run" in text
    assert (f"Cost: ${result.run_cost_usd:,.2f} per run" in text if config.price_usd_per_hour
            else "Cost: — per run" in text)
