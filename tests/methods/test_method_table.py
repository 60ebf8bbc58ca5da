"""submission.methods.ALL: each method module's declaration (the setting that turns it on,
its value without it, its name in the logs, its row in bench compare=methods), read by
Config.methods and the bench."""
from __future__ import annotations

import dataclasses

import pytest

from submission import settings
from submission.config import resolve
from submission.methods import ALL
from submission.methods.method import Method

DECLARED = {field.name for field in dataclasses.fields(settings.Settings)}


def test_every_declaration_names_a_setting_and_an_admitted_off_value():
    for method in ALL:
        assert method.setting in DECLARED, f"{method}: no setting {method.setting}"
        if not method.swapped_in_code:     # the plain loop's value is one the setting takes
            resolve(None, {method.setting: str(method.off).lower()})


@pytest.mark.parametrize("recipe, named", [
    ("mild", ["BlurPool", "channels last", "EMA (half-life 10 steps)", "label smoothing 0.08",
              "progressive resizing (from 0.5x)"]),
    ("baseline", ["channels last", "EMA (half-life 10 steps)", "label smoothing 0.1"]),
    ("hot", ["BlurPool", "channels last", "EMA (half-life 10 steps)", "label smoothing 0.13",
             "progressive resizing (from 0.6x)", "MixUp (alpha 0.25)", "SAM (rho 0.5, every 5th step)",
             "RandAugment (all, depth 1, severity 10)", "stochastic depth (sample, linear to 0.1)",
             "ColOut (0.05 of rows and columns)"])])
def test_a_configuration_names_the_methods_its_settings_turn_on(recipe, named):
    config = resolve(None, {"recipe": recipe})
    assert config.methods == named
    off = {m.setting: str(m.off).lower() for m in ALL if m.named and not m.swapped_in_code}
    assert resolve(None, {"recipe": recipe, **off}).methods == []


def test_a_new_method_is_named_once_its_module_declares_it(monkeypatch):
    """What a new method module adds: its declaration in the table (here MixUp's setting under
    another name), and the configuration names it where its setting is on."""
    import submission.methods as methods
    extra = Method("mixup_alpha", 0.0, lambda c: f"a new method ({c.mixup_alpha:g})")
    monkeypatch.setattr(methods, "ALL", (*methods.ALL, extra))
    assert resolve(None, {"recipe": "medium"}).methods[-1] == "a new method (0.2)"
    assert "a new method (0.2)" not in resolve(None, {"recipe": "mild"}).methods
