"""submission.projection.text: what the printed projection warns about."""
from __future__ import annotations

import pytest
from hand_profiles import _cpu, _profile, _project
from submission import projection


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
