"""`python -m submission settings`: every setting as declared, and the schedules a run admits."""
from __future__ import annotations

import pytest

from submission import settings as declared
from submission.config import ConfigError
from submission.show_settings import describe_settings, main


def test_a_refusal_lists_only_the_words_it_does_not_take():
    with pytest.raises(ConfigError) as refused:
        main(["recipe=hot", "scale_schedule_ratio=3", "results_dir=out", "lr=1"])
    message = str(refused.value)
    assert "not results_dir=out, lr=1 (" in message
    assert "recipe=hot" not in message.split("not ", 1)[1] and "scale_schedule_ratio=3" not in message


def test_a_recipe_that_leaves_the_ratio_open_shows_no_schedule_a_run_would_refuse():
    text = describe_settings("hot")
    assert "scale_schedule_ratio = 2.6" not in text          # (2.6, inf): 2.6 itself is refused
    assert "`settings recipe=hot scale_schedule_ratio=R` shows the schedule of a run at R above 2.6" in text
    medium = describe_settings("medium")
    assert "scale_schedule_ratio = 0.75;" in medium and "scale_schedule_ratio = 2.6;" in medium
    assert "scale_schedule_ratio = 3;" in describe_settings("hot", 3.0)


@pytest.mark.parametrize("recipe, ratio, message", [
    ("mild", 0.05, r"mild: a run would refuse this schedule: warmup \(8 epochs\) must be shorter than training"),
    ("baseline", -1.0, r"baseline: a run would refuse this schedule: scale_schedule_ratio=-1 must be above 0"),
])
def test_a_ratio_inside_the_published_range_that_a_run_would_refuse_shows_no_schedule(recipe, ratio, message):
    with pytest.raises(ConfigError, match=message):
        describe_settings(recipe, ratio)


def test_the_harness_list_names_the_recipe_asked_for_and_every_setting_once():
    text = describe_settings("hot")
    assert "  recipe = 'hot'  --" in text and "recipe = 'mild'" not in text
    for name in declared.names():
        assert text.count(f"\n  {name} = ") == 1, name
    harness, operational = text.index("Harness settings"), text.index("Operational settings")
    assert harness < text.index("\n  batch_per_device = ") < operational < text.index("\n  runs = ")
