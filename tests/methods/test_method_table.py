"""submission.methods.ALL: each method's declaration (its settings class, the setting that turns
it on, its value without it, its name in the logs, its row in bench compare=methods, what it
cannot do with other settings), read by settings.py, Config and the bench."""
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
    ("hot", ["BlurPool", "channels last", "ColOut (0.05 of rows and columns)", "EMA (half-life 10 steps)",
             "label smoothing 0.13", "MixUp (alpha 0.25)", "progressive resizing (from 0.6x)",
             "RandAugment (all, depth 1, severity 10)", "SAM (rho 0.5, every 5th step)",
             "stochastic depth (sample, linear to 0.1)"])])
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


def test_each_method_declares_its_own_settings_and_settings_py_lists_each_class():
    of_methods = {field.name for method in ALL if method.settings for field in dataclasses.fields(method.settings)}
    own = {field.name for part in (settings.RecipeSettings, settings.HarnessSettings, settings.OperationalSettings)
           for field in dataclasses.fields(part)}
    assert {"mixup_alpha", "sam_interval", "sam_rho", "resize_mode", "blurpool", "optimizer"} <= of_methods
    assert not own & of_methods
    assert own | of_methods == DECLARED
    for method in ALL:
        assert method.settings is None or issubclass(settings.Settings, method.settings), \
            f"settings.Settings does not list {method.settings.__name__}"
        assert method.settings is None or method.setting in {f.name for f in dataclasses.fields(method.settings)}
    assert settings.kind("sam_interval") == settings.RECIPE and settings.value_type("sam_interval") is int
    assert "sam_interval" in settings.profiled()          # its declaration's profile mark is kept


def test_a_methods_problem_is_the_configurations_where_the_method_is_on():
    from submission.errors import ConfigError
    with pytest.raises(ConfigError, match="randaugment_depth=1 needs train_loader=torchvision"):
        resolve(None, {"recipe": "hot", "train_loader": "ffcv"})
    resolve(None, {"recipe": "hot", "train_loader": "ffcv", "randaugment_depth": "0"})     # off: no problem
    with pytest.raises(ConfigError, match="progressive resizing needs 0 < resize_initial_scale"):
        resolve(None, {"recipe": "mild", "resize_initial_scale": "1.5"})
    resolve(None, {"recipe": "mild", "resize_initial_scale": "1.5", "progressive_resize": "false"})
