"""Every command's own options, declared once: `key=value` words like the settings, each a
`Declaration` (setting_declaration.py) with its type, default, meaning and what it admits;
`parse` reads and checks them for every verb.

The settings (submission/settings.py) say what a run computes and how it is launched; an
option says what a command does with them (where a bench writes its profile, which grid a
tradeoff runs, the price a score is costed at). A word that is neither an option of its verb
nor a setting is refused by the settings' own check. The `--flags` of earlier versions are
still read for one release, each with a one-line notice naming its new form (CHANGELOG.md).
"""
from __future__ import annotations

import sys
from typing import Any

from .errors import ConfigError
from .results import RULESET as RULESET_DEFAULT
from .setting_declaration import ABOVE_0, AT_LEAST_0, AT_LEAST_1, Admits, Declaration, NotAValue, Range


def _rulesets() -> tuple[str, ...]:
    from .compliance import known_rulesets
    return tuple(known_rulesets())


def option(meaning: str, default: Any = "", type: type = str, admits: Admits = None, *,
           flag: str | tuple[str, ...] = "", many: bool = False) -> Declaration:
    """One command option, declared as a setting is (setting_declaration.Declaration). flag: the
    --flag(s) of earlier versions, read with a notice; many: a comma-separated list, and the word
    repeated adds to it."""
    return Declaration(meaning, default, type, admits, many=many, flag=flag)


PRICE = option("the whole system's USD per hour that costs are read at (0: the campaign's own, "
               "from campaign.json)", 0.0, float, AT_LEAST_0, flag="--price")
RULESET = option("the MLPerf ruleset whose checker reads the logs (or whose vocabulary the system "
                 "description uses)", RULESET_DEFAULT, str, _rulesets, flag="--ruleset")
PROFILE = option("a bench profile (python -m submission bench ... json=FILE, or qualify's "
                 "profile_<recipe>.json)")
LOADER_PROFILE = option("a profile whose loader figures replace the profile's (Hot's CPU-bound "
                        "DataLoader measured on the target host)")
DP_EFFICIENCY = option("data-parallel efficiency assumed for more than one process (none: 0.9; "
                       "one process needs none)", None, float, Range(0, 1, low_open=True))

OPTIONS: dict[str, dict[str, Declaration]] = {
    "run": {"dry_run": option("print the configuration and the torchrun command, then any refusal; "
                              "run nothing", False, bool, flag="--dry-run")},
    "score": {"price_usd_per_hour": PRICE, "ruleset": RULESET},
    "report": {"price_usd_per_hour": PRICE},
    "package": {"org": option("the organisation: the package's folder and MLPerf submitter (default: "
                              "the org setting)", "", flag="--org"),
                "results": option("the results folder holding the systems' folders (default: the "
                                  "repository's results/)", flag="--results"),
                "out": option("where <org>/ is assembled (default: RESULTS/package)", "", flag="--out")},
    "describe": {"ruleset": RULESET},
    "check": {"rulesets": option("the rulesets checked, comma-separated (default: 2.0.0,4.0.0: the "
                                 "submission's and the newest)", "", str, flag="--ruleset", many=True),
              "verbose": option("print every reason, untruncated", False, bool, flag=("--verbose", "-v"))},
    "project": {"profile": PROFILE, "loader_profile": LOADER_PROFILE, "dp_efficiency": DP_EFFICIENCY},
    "bench": {"steps": option("timed steps of each row", 10, int, AT_LEAST_1),
              "rounds": option("turns of the rows timed side by side", 3, int, AT_LEAST_1),
              "json": option("write the profile that project and tradeoff read to this file"),
              "quick": option("only the figures a profile needs (qualify's form)", False, bool),
              "sweep": option("loader: the loader on each .beton write option", "", str, ("", "loader")),
              "compare": option("composer: Composer's Trainer with the Mild methods; methods: each "
                                "method swapped for the plain loop's", "", str, ("", "composer", "methods"))},
    "qualify": {"minutes": option("the budget (default: 8 on a GPU, 5 on a CPU)", None, float, ABOVE_0),
                "out": option("the record's folder (default: results/qualify/<system_name>-<time>)"),
                "recipes": option("the recipes profiled, comma-separated", "mild,medium,hot")},
    "tradeoff": {"grid": option("a grid of submission/grids/ by name, or a grid file (default: embedded, "
                                "imagenet with data_dir)"),
                 "point": option("run this point alone (--list numbers them; a SLURM array task)", None,
                                 int, AT_LEAST_0),
                 "redo": option("with point=K: train a finished point again, its old run kept under "
                                "attempts/", False, bool),
                 "list": option("print the points, their numbers and the SLURM array command; run "
                                "nothing", False, bool, flag="--list"),
                 "report": option("write the report of the points finished so far; run nothing", False,
                                  bool, flag="--report"),
                 "spread_limit": option("a run slower than this many times its point's fastest seed (or "
                                        "its configuration's other budgets) is flagged", 1.5, float,
                                        Range(1, low_open=True)),
                 "profile": PROFILE, "loader_profile": LOADER_PROFILE, "dp_efficiency": DP_EFFICIENCY,
                 "systems": option("the systems projected to, comma-separated (default: every descriptor "
                                   "with accelerators)")},
}


def _value(name: str, option: Declaration, text: str) -> Any:
    """`text` as a value of `option`, or a ConfigError saying what it takes."""
    allowed = option.choices()
    if not text and not (isinstance(allowed, tuple) and "" in allowed):
        raise ConfigError(f"{name} takes a value ({name}=...): e.g. {name}={_shown(option)} ({option.meaning})")
    what = ("one of " + ", ".join(f"{name}={c}" for c in allowed) if isinstance(allowed, tuple) and allowed
            else option.what() if option.type is not str else "a value")
    wrong = ConfigError(f"{name}={text}: give {what}, e.g. {name}={_shown(option)} ({option.meaning})")
    try:
        value = option.read(text)
    except NotAValue:
        raise wrong from None
    if option.problem(value):
        raise wrong
    return value


def _shown(option: Declaration) -> str:
    """An example value: the default, else the first admitted word, else VALUE."""
    if option.default not in ("", None):
        return str(option.default).lower() if option.type is bool else str(option.default)
    allowed = option.choices()
    return next((c for c in allowed if c), "VALUE") if isinstance(allowed, tuple) else "VALUE"


def _new_form(verb: str, words: list[str]) -> list[str]:
    """The words with every --flag of earlier versions turned into its key=value, a notice said
    for each."""
    flags = {flag: name for name, option in OPTIONS.get(verb, {}).items()
             for flag in ((option.flag,) if isinstance(option.flag, str) else option.flag) if flag}
    out, i = [], 0
    while i < len(words):
        word = words[i]
        flag, sep, inline = word.partition("=")
        name = flags.get(flag)
        if name is None:
            out.append(word)
            i += 1
            continue
        option = OPTIONS[verb][name]
        if option.type is bool:
            value, i = "true", i + 1
        elif sep:
            value, i = inline, i + 1
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 2
        else:
            raise ConfigError(f"{flag} takes a value: {verb} reads it as {name}=VALUE")
        print(f"note: {flag} is now {name}={'true' if option.type is bool else 'VALUE'} "
              f"(`python -m submission {verb} ... {name}={value}`); the old form goes in the next "
              "release", file=sys.stderr)
        out.append(f"{name}={value}")
    return out


def parse(verb: str, words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(verb's options, every one with its value or default; the other words, in order: the
    settings and the positional words), each option checked against its declaration."""
    declared = OPTIONS.get(verb, {})
    values = {name: option.default for name, option in declared.items()}
    seen: dict[str, bool] = {}
    rest = []
    for word in _new_form(verb, words):
        name, sep, text = word.partition("=")
        if name in declared:
            if not sep:
                raise ConfigError(f"{name} takes a value ({name}=...): {declared[name].meaning}")
            value = _value(name, declared[name], text)
            if declared[name].many and values[name] and value and seen.get(name):
                value = f"{values[name]},{value}"
            values[name], seen[name] = value, True
        else:
            rest.append(word)
    return values, rest


def help_text(verb: str) -> str:
    """The options of `verb`, for `python -m submission VERB --help`."""
    declared = OPTIONS.get(verb, {})
    if not declared:
        return f"{verb} has no options of its own; it takes the settings (python -m submission settings)."
    settings_too = "" if verb == "check" else "; the settings too: python -m submission settings"
    lines = [f"options of {verb} (key=value{settings_too}):"]
    for name, option in declared.items():
        allowed = option.choices()
        what = ("true/false" if option.type is bool else str(allowed) if isinstance(allowed, Range)
                else "|".join(c for c in allowed if c) if allowed else option.type.__name__)
        shown = str(option.default).lower() if option.type is bool else option.default
        default = "" if option.default in ("", None) else f"; default {shown}"
        lines.append(f"  {name}=  {option.meaning} ({what}{default})")
    return "\n".join(lines)
