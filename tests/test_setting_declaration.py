"""submission/setting_declaration.py: one form declares a value (its annotation its type), and
one parser reads its text, for settings, options, profile figures and the worker's arguments."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from submission.setting_declaration import AT_LEAST_1, HARNESS, RECIPE, NotAValue, declarations, declare

Colour = Literal["red", "green"]


@dataclass(frozen=True)
class Inner:
    count: int = declare("how many", admits=AT_LEAST_1)


@dataclass(frozen=True, kw_only=True)
class Example:
    colour: Colour = declare("a colour", "red")
    colours: str = declare("colours, comma-separated", "red", admits=Colour, many=True)
    share: float | None = declare("a share", None)
    folder: Path | None = declare("a folder", None)
    inner: Inner = declare()
    by_side: dict[int, Inner] = declare()
    free: dict[str, int] | None = declare(default=None)


def test_the_annotation_says_the_type_the_words_and_the_parts():
    declared = declarations(Example)
    assert list(declared) == ["colour", "colours", "share", "folder", "inner", "by_side", "free"]
    assert declared["colour"].type is str and declared["colour"].admits == ("red", "green")
    assert declared["colours"].problem("green,red") is None and declared["colours"].problem("blue")
    assert declared["share"].type is float and declared["share"].optional
    assert declared["inner"].type is dict and declared["inner"].part is Inner
    assert declared["by_side"].sides is Inner and declared["free"].sides is None
    assert declared["colour"].what() == "one of red, green"
    assert declarations(Inner)["count"].what() == "a whole number above 0"


def test_one_parser_reads_each_type_from_its_text_and_refuses_what_is_not_one():
    declared = declarations(Example)
    assert declared["share"].read("0.5") == 0.5 and declared["share"].read("None") is None
    assert declared["folder"].read("a/b") == Path("a/b")
    assert declarations(Inner)["count"].read("3") == 3
    with pytest.raises(NotAValue, match="a whole number"):
        declarations(Inner)["count"].read("3.5")
    with pytest.raises(NotAValue, match="a number"):
        declared["share"].read("inf")
    assert declared["share"].text(0.5) == "0.5" and declared["share"].text(None) == "none"


def test_a_declaration_that_says_a_thing_twice_or_wrongly_is_refused():
    with pytest.raises(ValueError, match="a recipe setting's value lives in the recipe files"):
        declare("x", 1, kind=RECIPE)
    with pytest.raises(ValueError, match="a setting's kind is one of recipe, harness, operational"):
        declare("x", 1, kind="runtime")

    @dataclass(frozen=True)
    class Twice:
        colour: Colour = declare("a colour", "red", admits=("red",), kind=HARNESS)

    with pytest.raises(TypeError, match="colour: a Literal admits its own words"):
        declarations(Twice)


def test_every_word_choice_of_a_setting_or_an_option_is_a_literal_type():
    """The allowed words are written once, as a Literal that mypy checks; the declarations and
    the bench profile read them from it (the rulesets are mlperf-logging's, asked when needed)."""
    import typing

    from submission import bench_profile, cli, loader_kinds, settings
    classes = [settings.Settings, *(verb.options for verb in cli.VERBS.values())]
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for name, declared in declarations(cls).items():
            words = declared.admits
            if isinstance(words, tuple) and not declared.many:
                assert typing.get_origin(hints[name]) is Literal, f"{cls.__name__}.{name}"
                assert typing.get_args(hints[name]) == words
    assert bench_profile.LOADER_KINDS == typing.get_args(loader_kinds.TrainLoader) == settings.admits("train_loader")
    assert settings.admits("tracker") == typing.get_args(settings.Tracker)


def test_the_layouts_declarations_of_a_new_option_setting_and_figure_are_fields_of_the_classes_named():
    """docs/layout.md's examples, each added to the class its comment names, read back typed."""
    import importlib
    import re
    from dataclasses import make_dataclass

    from submission import setting_declaration

    from conftest import REPO

    text = (REPO / "docs" / "layout.md").read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index("## Declaring a value"):], re.S)[1]
    pairs = re.findall(r"# submission/(\S+)\.py, class (\w+)[^\n]*\n(\w+): ([^=]+) = (declare\(.*\))\n", block)
    assert [module for module, *_ in pairs] == ["options", "settings", "bench_profile"]
    for module, cls_name, name, annotation, call in pairs:
        base = getattr(importlib.import_module(f"submission.{module}"), cls_name)
        names = vars(setting_declaration)
        extended = make_dataclass("Extended", [(name, eval(annotation), eval(call, names))], bases=(base,),
                                  frozen=True, kw_only=True)
        declared = declarations(extended)[name]
        assert list(declarations(extended))[:-1] == list(declarations(base)) and declared.type in (int, bool)
        assert declared.read("3" if declared.type is int else "true") in (3, True)
