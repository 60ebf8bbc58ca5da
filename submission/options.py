"""Every command's own options, declared once: `key=value` words like the settings. A command's
options are a frozen dataclass whose fields are declared as settings are (`declare`,
setting_declaration.py: the annotation its type, then its meaning, default and what it admits);
`parse` reads and checks the words into it, and the command's function receives it
(submission/cli.py's VERBS pairs each command with its class).

The settings (submission/settings.py) say what a run computes and how it is launched; an
option says what a command does with them (where a bench writes its profile, which grid a
tradeoff runs, the price a score is costed at). A word that is neither an option of its verb
nor a setting is refused by the settings' own check. The `--flags` of earlier versions are
still read for one release, each with a one-line notice naming its new form (CHANGELOG.md).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .errors import ConfigError
from .results import RULESET as RULESET_DEFAULT
from .setting_declaration import ABOVE_0, AT_LEAST_0, AT_LEAST_1, Declaration, NotAValue, Range, declarations, declare

Options = TypeVar("Options")
# the bench's other benches (empty: the main one)
Sweep = Literal["", "loader"]
Comparison = Literal["", "composer", "methods"]


def _rulesets() -> tuple[str, ...]:
    from .compliance import known_rulesets
    return tuple(known_rulesets())


@dataclass(frozen=True, kw_only=True)
class NoOptions:
    """A command with no options of its own (its words are settings or positional)."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    dry_run: bool = declare("print the configuration and the torchrun command, then any refusal; run nothing",
                            False, flag="--dry-run")


@dataclass(frozen=True, kw_only=True)
class PriceOption:
    price_usd_per_hour: float = declare("the whole system's USD per hour that costs are read at (0: the "
                                        "campaign's own, from campaign.json)", 0.0, admits=AT_LEAST_0,
                                        flag="--price")


@dataclass(frozen=True, kw_only=True)
class RulesetOption:
    ruleset: str = declare("the MLPerf ruleset whose checker reads the logs (or whose vocabulary the system "
                           "description uses)", RULESET_DEFAULT, admits=_rulesets, flag="--ruleset")


@dataclass(frozen=True, kw_only=True)
class ProfileOptions:
    """The bench profiles a projection reads (project, tradeoff)."""
    profile: str = declare("a bench profile (python -m submission bench ... json=FILE, or qualify's "
                           "profile_<recipe>.json)", "")
    loader_profile: str = declare("a profile whose loader figures replace the profile's (Hot's CPU-bound "
                                  "DataLoader measured on the target host)", "")
    dp_efficiency: float | None = declare("data-parallel efficiency assumed for more than one process "
                                          "(none: 0.9; one process needs none)", None,
                                          admits=Range(0, 1, low_open=True))


# A dataclass takes its bases' fields in the reverse order of the bases (score: price, then ruleset).
@dataclass(frozen=True, kw_only=True)
class ScoreOptions(RulesetOption, PriceOption):
    pass


@dataclass(frozen=True, kw_only=True)
class ReportOptions(PriceOption):
    pass


@dataclass(frozen=True, kw_only=True)
class DescribeOptions(RulesetOption):
    pass


@dataclass(frozen=True, kw_only=True)
class ProjectOptions(ProfileOptions):
    beyond_measured_threads: float | None = declare(
        "what each loader thread beyond the most the profile measured adds, as a share of that count's "
        "rate per thread (none: 0, flat, where the profile swept its threads; 1, linear, where it "
        "measured one count); an assumption, printed", None, admits=Range(0, 1))


@dataclass(frozen=True, kw_only=True)
class PackageOptions:
    org: str = declare("the organisation: the package's folder and MLPerf submitter (default: the org "
                       "setting)", "", flag="--org")
    results: str = declare("the results folder holding the systems' folders (default: the repository's "
                           "results/)", "", flag="--results")
    out: str = declare("where <org>/ is assembled (default: RESULTS/package)", "", flag="--out")


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    rulesets: str = declare("the rulesets checked, comma-separated (default: 2.0.0,4.0.0: the submission's "
                            "and the newest)", "", many=True, flag="--ruleset")
    verbose: bool = declare("print every reason, untruncated", False, flag=("--verbose", "-v"))


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    steps: int = declare("timed steps of each row", 10, admits=AT_LEAST_1)
    rounds: int = declare("turns of the rows timed side by side", 3, admits=AT_LEAST_1)
    json: str = declare("write the profile that project and tradeoff read to this file", "")
    quick: bool = declare("only the figures a profile needs (qualify's form)", False)
    sweep: Sweep = declare("loader: the loader on each .beton write option, then by its thread count", "")
    sweep_threads: int | None = declare("the loader alone at 1, 2, 4, ... up to N threads, recorded in the "
                                        "profile (default: the CPUs this process may use; quick=true: "
                                        "none unless given); 0: no sweep", None, admits=AT_LEAST_0)
    compare: Comparison = declare("composer: Composer's Trainer with the Mild methods; methods: each method "
                                  "swapped for the plain loop's", "")


@dataclass(frozen=True, kw_only=True)
class QualifyOptions:
    minutes: float | None = declare("the budget (default: 8 on a GPU, 5 on a CPU)", None, admits=ABOVE_0)
    out: str = declare("the record's folder, new or empty (default: results/qualify/<system_name>-<time>)", "")
    recipes: str = declare("the recipes profiled, comma-separated", "mild,medium,hot")


@dataclass(frozen=True, kw_only=True)
class GridOptions:
    """The grid a tradeoff runs, and how."""
    grid: str = declare("a grid of submission/grids/ by name, or a grid file (default: embedded, imagenet "
                        "with data_dir)", "")
    point: int | None = declare("run this point alone (--list numbers them; a SLURM array task)", None,
                                admits=AT_LEAST_0)
    redo: bool = declare("with point=K: train a finished point again, its old run kept under attempts/", False)
    list: bool = declare("print the points, their numbers and the SLURM array command; run nothing", False,
                         flag="--list")
    report: bool = declare("write the report of the points finished so far; run nothing", False,
                           flag="--report")
    spread_limit: float = declare("a run slower than this many times its point's fastest seed (or its "
                                  "configuration's other budgets) is flagged", 1.5,
                                  admits=Range(1, low_open=True))


@dataclass(frozen=True, kw_only=True)
class TradeoffOptions(ProfileOptions, GridOptions):
    """The grid's options, then the projection's (a profile, the systems)."""
    systems: str = declare("the systems projected to, comma-separated (default: every descriptor with "
                           "accelerators)", "")


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
        return option.text(option.default)
    allowed = option.choices()
    return next((c for c in allowed if c), "VALUE") if isinstance(allowed, tuple) else "VALUE"


def _new_form(verb: str, declared: dict[str, Declaration], words: list[str]) -> list[str]:
    """The words with every --flag of earlier versions turned into its key=value, a notice said
    for each."""
    flags = {flag: name for name, option in declared.items()
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
        option = declared[name]
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


def parse(verb: str, options: type[Options], words: list[str]) -> tuple[Options, list[str]]:
    """(verb's options, each given one checked against its declaration, the others at their
    defaults; the other words, in order: the settings and the positional words)."""
    declared = declarations(options)
    values: dict[str, Any] = {}
    rest = []
    for word in _new_form(verb, declared, words):
        name, sep, text = word.partition("=")
        if name not in declared:
            rest.append(word)
            continue
        if not sep:
            raise ConfigError(f"{name} takes a value ({name}=...): {declared[name].meaning}")
        value = _value(name, declared[name], text)
        if declared[name].many and values.get(name) and value:      # the word repeated adds to the list
            value = f"{values[name]},{value}"
        values[name] = value
    return options(**values), rest


def words_of(options: Any) -> list[str]:
    """The options given (those not at their default) as the key=value words that give them again."""
    return [f"{name}={option.text(getattr(options, name))}" for name, option in declarations(type(options)).items()
            if getattr(options, name) != option.default]


def help_text(verb: str, options: type) -> str:
    """The options of `verb` (its class, `options`), for `python -m submission VERB --help`."""
    declared = declarations(options)
    if not declared:
        return f"{verb} has no options of its own; it takes the settings (python -m submission settings)."
    settings_too = "" if verb == "check" else "; the settings too: python -m submission settings"
    lines = [f"options of {verb} (key=value{settings_too}):"]
    for name, option in declared.items():
        allowed = option.choices()
        what = ("true/false" if option.type is bool else str(allowed) if isinstance(allowed, Range)
                else "|".join(c for c in allowed if c) if allowed else option.type.__name__)
        default = "" if option.default in ("", None) else f"; default {option.text(option.default)}"
        lines.append(f"  {name}=  {option.meaning} ({what}{default})")
    return "\n".join(lines)
