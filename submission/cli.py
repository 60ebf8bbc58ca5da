"""Command line: `python -m submission VERB [key=value ...]` (run_and_time.sh calls `run`).

  run [system=NAME] [key=value ...] [dry_run=true] the campaign (default verb)
  prepare [system=NAME] [key=value ...]           only convert the data to .beton
  score RESULTS_DIR [price_usd_per_hour=P] [ruleset=R]   olympic score + per-run table
  compare [RESULTS_ROOT]                           one table across systems
  package NAME ... [org=ORG] [results=DIR] [out=DIR]   assemble <org>/ from systems' results
  check PATH                                       the official MLPerf checkers
  describe [system=NAME] [ruleset=R]               the MLPerf system description JSON
  settings [recipe=NAME]                           every setting, its value and meaning
  project system=NAME profile=FILE [key=value ...] projected minutes and dollars of a run
  report RESULTS_DIR [price_usd_per_hour=P]        report.md with plots and tables
  bench [system=NAME] [key=value ...] [steps=N] [rounds=R] [json=FILE] [quick=true] [compare=composer|methods] [sweep=loader]   throughput figures (a profile for project)
  qualify [minutes=M] [data_dir=DIR] [out=DIR] [key=value ...]   profile this machine for every recipe: benches, a short campaign, energy
  tradeoff [grid=NAME|FILE] [point=K] [key=value ...] [list=true|report=true] | tradeoff published   top-1 against time and money across budgets
"""  # noqa: E501 - the usage table is printed as it stands
from __future__ import annotations

import difflib
import errno
import json
import os
import select
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .config import REPO_ROOT, Config, ConfigError, parse_overrides, resolve
from .options import (
    BenchOptions,
    CheckOptions,
    DescribeOptions,
    NoOptions,
    PackageOptions,
    ProjectOptions,
    QualifyOptions,
    ReportOptions,
    RunOptions,
    ScoreOptions,
    TradeoffOptions,
    help_text,
    parse,
)
from .results import CampaignError
from .run_folder import CampaignFolder, ResultsRoot


def _resolve(words: list[str]) -> Config:
    misplaced = [w for w in words if w in VERBS]
    if misplaced:
        raise ConfigError(f"{misplaced[0]!r} is a command: it comes first, before the settings "
                          f"(python -m submission {misplaced[0]} key=value ...); ./run_and_time.sh "
                          "only runs campaigns")
    from .preflight import resolve_here
    return resolve_here(None, parse_overrides(words))


def cmd_run(options: RunOptions, words: list[str]) -> int:
    from . import campaign, runs
    config = _resolve(words)
    if options.dry_run:
        campaign.require_target(config)
        plan = runs.plan_launch(config)        # may lower workers_per_device
        try:
            plan.approved()
        finally:    # printed also when refused: it shows what would have run
            print(campaign.dry_run(plan.config))
        return 0
    return campaign.run_campaign(config)


def cmd_prepare(_: NoOptions, words: list[str]) -> int:
    from .data.prepare import prepare
    data = prepare(_resolve(words))
    print(json.dumps(data.__dict__, indent=1))
    return 0


def _one_folder(verb: str, words: list[str], what: str) -> Path:
    """The one positional word of `verb`: a folder that exists."""
    if len(words) != 1 or "=" in words[0]:
        raise ConfigError(f"{verb} takes one {what} (and its options: python -m submission {verb} --help), "
                          f"not {' '.join(words) or 'none'}")
    folder = Path(words[0])
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder: {verb} takes {what}")
    return folder


def cmd_score(options: ScoreOptions, words: list[str]) -> int:
    from . import score
    folder = _one_folder("score", words, "results folder (results/<system_name>)")
    score.require_result_files(folder)
    summary = score.summarize(folder, options.price_usd_per_hour, options.ruleset)
    score.write_summary(folder, summary)
    print(CampaignFolder(folder).summary_text.read_text())
    return 0 if summary.valid else 1


def cmd_compare(_: NoOptions, words: list[str]) -> int:
    from . import comparison
    if len(words) > 1:
        raise ConfigError(f"compare takes one results folder (default results/), not {' '.join(words)}")
    root = Path(words[0]) if words else REPO_ROOT / "results"
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder: compare takes the results root (results/)")
    if CampaignFolder(root).result_files():
        raise ConfigError(f"{root} is one system's results: compare takes the folder above it "
                          f"({root.parent}); `python -m submission score {root}` scores this one")
    print(comparison.compare_systems(root))
    return 0


def cmd_package(options: PackageOptions, names: list[str]) -> int:
    from . import package
    if not names or any("=" in name for name in names):
        raise ConfigError("package takes the results/<system_name> folders to include by name "
                          "(python -m submission package NAME ... [org=ORG] [results=DIR] [out=DIR])"
                          + (f", not {' '.join(names)}" if names else ""))
    org = options.org or resolve().org
    results = Path(options.results) if options.results else REPO_ROOT / "results"
    out = Path(options.out) if options.out else ResultsRoot(results).packages
    built = package.build_package(results, names, org, out, REPO_ROOT)
    if not built.passed:
        print("package: " + package.failure_text(built, out / org))
        return 1
    print(f"package: {built.path} (passes the MLPerf checkers)")
    return 0


CHECK_LINE = "compliance/check PATH [rulesets=R,R] [verbose=true]  (or: python -m submission check ...)"


def cmd_check(options: CheckOptions, paths: list[str]) -> int:
    """Check PATH (result_*.txt, a folder of result files, or a package <org>/) with the
    official mlperf-logging checkers: 0 all passed, 1 something failed, 2 nothing checkable."""
    from . import compliance
    if len(paths) != 1 or paths[0].startswith("-") or "=" in paths[0]:
        raise ConfigError(f"check takes one PATH and its options, not {' '.join(paths) or 'nothing'}: "
                          f"{CHECK_LINE}")
    rulesets = (tuple(r.strip() for r in options.rulesets.split(",") if r.strip())
                or compliance.DEFAULT_RULESETS)
    try:
        verdicts = compliance.check_path(paths[0], rulesets)
    except (FileNotFoundError, compliance.CheckError) as exc:
        print(f"compliance: {exc}", file=sys.stderr)
        return 2
    print(compliance.format_table(verdicts, verbose=options.verbose))
    if compliance.is_package(Path(paths[0])) and not any(v.checker == "package" for v in verdicts):
        print("note: the package checker ran for no ruleset: it runs for rulesets before 4.0.0 "
              "(packages are written in the 2.0.0 vocabulary)")
    return 0 if all(v.ok for v in verdicts) else 1


def cmd_describe(options: DescribeOptions, words: list[str]) -> int:
    """The MLPerf system description exactly as a run of these settings writes it."""
    from .system_json import for_ruleset, run_description
    print(json.dumps(for_ruleset(run_description(_resolve(words)), options.ruleset), indent=2))
    return 0


def cmd_project(options: ProjectOptions, words: list[str]) -> int:
    from . import projection
    return projection.main(options, words)


def cmd_report(options: ReportOptions, words: list[str]) -> int:
    from .report import campaign_report
    return campaign_report.main(options, words)


def cmd_settings(_: NoOptions, words: list[str]) -> int:
    from . import show_settings
    print(show_settings.main(words))
    return 0


def cmd_bench(options: BenchOptions, words: list[str]) -> int:
    from .bench import main
    return main(options, words)


def cmd_qualify(options: QualifyOptions, words: list[str]) -> int:
    from .qualify import main
    return main(options, words)


def cmd_tradeoff(options: TradeoffOptions, words: list[str]) -> int:
    from .tradeoff.command import main
    return main(options, words)


Options = TypeVar("Options")


@dataclass(frozen=True)
class Verb:
    """A command: the class of its options (submission/options.py) and the function that does
    it, given them and its other words (settings, positional words)."""
    options: type[Any]
    run: Callable[[Any, list[str]], int]


def verb(options: type[Options], run: Callable[[Options, list[str]], int]) -> Verb:
    """A command whose function takes `options` (mypy checks that the two go together)."""
    return Verb(options, run)


# Each verb, its options and the function that does it (the module docstring says what each does).
VERBS: dict[str, Verb] = {
    "run": verb(RunOptions, cmd_run),
    "prepare": verb(NoOptions, cmd_prepare),
    "score": verb(ScoreOptions, cmd_score),
    "compare": verb(NoOptions, cmd_compare),
    "package": verb(PackageOptions, cmd_package),
    "check": verb(CheckOptions, cmd_check),
    "describe": verb(DescribeOptions, cmd_describe),
    "settings": verb(NoOptions, cmd_settings),
    "project": verb(ProjectOptions, cmd_project),
    "report": verb(ReportOptions, cmd_report),
    "bench": verb(BenchOptions, cmd_bench),
    "qualify": verb(QualifyOptions, cmd_qualify),
    "tradeoff": verb(TradeoffOptions, cmd_tradeoff),
}


HELP_WORDS = ("-h", "--help", "help")


def _usage_lines() -> list[str]:
    """This module's usage table: one line a command, its words and what it does."""
    return [line.strip() for line in __doc__.splitlines() if line.startswith("  ") and line.strip()]


def commands() -> str:
    """Every command with what it does, for `python -m submission --help` (or -h, help)."""
    return ("usage: python -m submission COMMAND [key=value ...]   (./run_and_time.sh runs `run`)\n\n"
            "commands:\n" + "\n".join(f"  {line}" for line in _usage_lines())
            + "\n\n`python -m submission COMMAND --help`: the command's own options; "
            "`python -m submission settings`: every setting, its value and meaning.")


def usage(verb: str) -> str:
    """The verb's line of this module's usage, and its options from their declaration."""
    line = next((usage_line for usage_line in _usage_lines()
                 if usage_line.startswith(verb + " ") or usage_line == verb), "")
    return f"python -m submission {line}\n\n{help_text(verb, VERBS[verb].options)}"


def _advice(exc: OSError) -> str:
    """What to do about a failed file operation, by its cause."""
    if exc.errno == errno.ENOENT:
        return "Check the path: it does not exist."
    if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.EEXIST):
        return "A file stands where a folder is needed, or a folder where a file is: give another path."
    return ("Free space or fix the permissions, then run the same command again: complete "
            "result files are never rewritten, and a package is only put in place once it is whole.")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = bool(argv) and argv[0] in VERBS
    verb = argv.pop(0) if named else "run"
    try:
        if not named and argv and argv[0] in HELP_WORDS:      # no command named: list them
            if argv[0] == "help" and len(argv) > 1 and argv[1] in VERBS:
                print(usage(argv[1]))                          # `help VERB`, as `VERB --help`
            else:
                print(commands())
            return 0
        if set(argv) & {"-h", "--help"}:
            print(usage(verb))
            return 0
        if verb == "run" and argv and argv[0] not in VERBS and "=" not in argv[0] \
                and not argv[0].startswith("-"):
            close = difflib.get_close_matches(argv[0].lower(), VERBS, n=1)
            raise ConfigError(f"unknown command {argv[0]!r}" + (f" (did you mean {close[0]}?)" if close else "")
                              + f". Commands: {', '.join(VERBS)}; `python -m submission help` "
                              "says what each does")
        options, words = parse(verb, VERBS[verb].options, argv)
        return VERBS[verb].run(options, words)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_is_gone():
            return 141          # `... | head` stopped reading: not an error of ours
        print(f"error: {exc}. {_advice(exc)}", file=sys.stderr)
        return 1
    except (ConfigError, ValueError) as exc:   # bad input: the message says what to do
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CampaignError as exc:               # a campaign cannot go on: the message says why
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _stdout_is_gone() -> bool:
    """True when stdout is a pipe whose reader has gone (poll reports an error on it); stdout
    then points at /dev/null, so that Python's own flush at exit does not fail again."""
    try:
        stdout = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    poller = select.poll()
    poller.register(stdout, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poller.poll(0)):
        return False
    os.dup2(os.open(os.devnull, os.O_WRONLY), stdout)
    return True
