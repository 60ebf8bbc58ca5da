"""submission.projection.text: what the printed projection warns about."""
from __future__ import annotations

from hand_profiles import _cpu, _profile, _project
from submission import projection


def test_profile_of_another_setting_is_warned_about():
    config = _cpu(progressive_resize="false")
    result = _project(config, _profile([32], batch=128, system="p4d"), "p.json")
    text = projection.format_projection(result)
    assert "batch_per_device=128" in text and "measured for system p4d" in text
    assert "no in-run set-up figures" in text
