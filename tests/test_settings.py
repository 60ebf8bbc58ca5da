"""submission/settings.py: one typed dataclass of every setting, composed of named classes, and
what resolves a configuration imports no torch."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from submission import settings
from submission.errors import ConfigError


@pytest.mark.e2e
def test_resolving_a_configuration_imports_no_torch():
    """The settings, the configuration and the verbs that only resolve one answer in a second
    on a machine whose torch takes several to import."""
    code = ("import sys\n"
            "import submission.config, submission.settings, submission.show_settings, submission.options\n"
            "from submission.config import resolve\n"
            "resolve(None, {'recipe': 'hot'}).methods\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_settings_is_a_plain_frozen_dataclass_and_each_field_has_its_declaration():
    assert dataclasses.is_dataclass(settings.Settings) and settings.Settings.__module__ == "submission.settings"
    fields = dataclasses.fields(settings.Settings)
    assert [f.name for f in fields] == list(settings.DECLARED)
    assert all(settings.DECLARED[f.name].meaning for f in fields)
    assert settings.value_type("mixup_alpha") is float and settings.optional("target_accuracy")
    assert settings.names(settings.RECIPE)[0] == "init_conv"      # the recipe's settings come first


def test_a_comma_list_setting_checks_each_word():
    assert settings.problem("tracker", "tensorboard,wandb") is None
    assert settings.problem("tracker", "tensorboard,mlflow") == (
        "must be one of tensorboard, wandb, none, or several joined by commas")
    assert settings.words("tracker", " wandb,TensorBoard,wandb ") == ["wandb", "tensorboard"]
    assert settings.admits_text("tracker") == "one of tensorboard, wandb, none, or several joined by commas"


def test_coerce_reads_words_as_the_declared_type():
    assert settings.coerce("batch_per_device", "64", "the command line") == 64
    assert settings.coerce("lr", "5e-4", "the command line") == 5e-4
    assert settings.coerce("target_accuracy", "none", "the command line") is None
    with pytest.raises(ConfigError, match="batch_per_device takes a whole number, not 'x'"):
        settings.coerce("batch_per_device", "x", "the command line")
    assert settings.coerce("compile", "True", "the command line") is True
    assert settings.coerce("lr", 2, "a grid") == 2.0 and isinstance(settings.coerce("lr", 2, "a grid"), float)
    for wrong in ("yes", "1"):          # YAML 1.1 read yes as true; the one parser reads true and false
        with pytest.raises(ConfigError, match=f"compile takes true or false, not '{wrong}'"):
            settings.coerce("compile", wrong, "the command line")
    with pytest.raises(ConfigError, match=r"lr takes a number, not 'nan' \(in a grid\)"):
        settings.coerce("lr", "nan", "a grid")


def test_the_configuration_reaches_no_tracker_at_any_depth():
    """The tracker's choices are declared with the settings: config, settings and the method
    declarations import nothing of tracking, at any depth (function-level imports included)."""
    from test_layout import package_graph
    graph = package_graph()
    reached, todo = set(), ["submission.config"]
    while todo:
        module = todo.pop()
        for imported in graph.get(module, ()):
            if imported not in reached:
                reached.add(imported)
                todo.append(imported)
    assert "submission.settings" in reached and "submission.tracking" not in reached
