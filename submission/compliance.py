"""Run the official MLPerf checkers (mlperf-logging) on result files or a package.

    python -m submission check PATH [rulesets=R,R] [verbose=true]      (or compliance/check)

PATH is one result file (result_*.txt), a folder holding result files at any depth
(e.g. results/local_cpu/resnet), a system description (*.json), or a whole package
folder <org>/ with systems/ and results/ (and benchmarks/).

Checks, one verdict per (target, checker, ruleset):
  log-format     every result file: ends in a newline and its last line is a complete
                 `:::MLLOG {json}` line. The official parser skips a line cut before the
                 token and its verdict depends on where a run was cut: checked here.
  compliance     the official compliance checker, per ruleset (default 2.0.0 and 4.0.0),
                 through its Python API. Its warnings count as failures: it only warns
                 about a key required EXACTLY_ONE time that occurs more often with the
                 same value (e.g. two run_start lines), which no valid run produces.
  system-desc    each systems/*.json, per ruleset, with the official
                 check_system_desc; for rulesets >= 4.0.0 on a copy whose status is
                 mapped by submission.system_json.for_ruleset.
  package        the official package checker, as a subprocess, for the requested
                 rulesets before 4.0.0 (packages are written in the 2.0.0 vocabulary).
                 It exits 0 even when it fails: its verdict line is read instead.

Olympic scoring in a package: the official package checker accepts one non-compliant
result file per benchmark and system (four for unet3d), since the score drops it as the
slowest run. Here that run's failed checks are still listed, with the verdict ACCEPTED
and why, and do not fail the package; a second bad run in the same folder fails every
bad run's checks, as do the package checker's own strict rules (exactly 5 files, seeds,
RCPs in the closed division). A run counts as bad when any of its checks fails, in any
ruleset asked for. A single file or a results folder checked outside a package is
judged strictly: every failure fails.

Exit status: 0 when everything passed (or was accepted under olympic scoring), 1 when
anything failed, 2 when PATH does not exist, holds nothing checkable, or a ruleset is
unknown.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser
from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

from submission.results import RULESET
from submission.system_descriptor import SystemDescriptor
from submission.system_json import STATUS_4X, for_ruleset, uses_availability_status

USAGE = "training"
DEFAULT_RULESETS = (RULESET, "4.0.0")
TOKEN = ":::MLLOG "
PACKAGE_OK = "PACKAGE CHECKER FOUND NO ERRORS"
PACKAGE_FAILED = "PACKAGE CHECKER FOUND ERRORS"
PACKAGE_TIMEOUT_S = 900


def olympic_allowance(benchmark: str) -> int:
    """Non-compliant result files the package checker accepts per benchmark folder
    (mlperf_logging.package_checker: 4 for unet3d, 1 for every other benchmark)."""
    return 4 if benchmark == "unet3d" else 1


@dataclass
class Verdict:
    target: str          # the file or folder checked
    checker: str         # log-format, compliance, system-desc, package
    ruleset: str         # e.g. 2.0.0; "-" where the check does not depend on one
    passed: bool
    reason: str          # the first reason it failed ("" when it passed)
    details: list[str] = field(default_factory=list)   # every reason found
    accepted: str = ""   # a failure accepted under olympic scoring: why ("" otherwise)

    @property
    def ok(self) -> bool:
        """Passed, or failed in a way the official package checker accepts."""
        return self.passed or bool(self.accepted)

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "ACCEPTED" if self.accepted else "FAIL"


class CheckError(ValueError):
    """PATH or the arguments cannot be checked at all (exit status 2)."""


# ---------------------------------------------------------------------------
def display_path(path: Path) -> str:
    """path relative to the working folder where it lies below it (as verdicts name targets)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _verdict(target: Path, checker: str, ruleset: str, reasons: list[str]) -> Verdict:
    return Verdict(display_path(target), checker, ruleset, not reasons,
                   reasons[0] if reasons else "", list(reasons))


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _captured_logging() -> Iterator[_Capture]:
    """Collect what the official checkers log (and keep it off the terminal: with a
    handler on the root logger, logging neither prints nor calls basicConfig)."""
    root = logging.getLogger()
    handler = _Capture()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def known_rulesets() -> list[str]:
    folder = Path(mlp_compliance.__file__).parent
    found = (re.fullmatch(rf"{USAGE}_(\d+\.\d+\.\d+)", p.name) for p in folder.iterdir() if p.is_dir())
    return sorted((m.group(1) for m in found if m), key=lambda r: tuple(map(int, r.split("."))))


def _check_rulesets(rulesets: Sequence[str]) -> list[str]:
    known = known_rulesets()
    unknown = [r for r in rulesets if r not in known]
    if unknown:
        raise CheckError(f"unknown ruleset {', '.join(unknown)}: mlperf-logging knows "
                         f"{', '.join(known)}")
    if not rulesets:
        raise CheckError("no ruleset to check against")
    return list(dict.fromkeys(rulesets))


# ---- result files ----------------------------------------------------------
def log_format_problems(path: Path) -> list[str]:
    """What the official parser would skip or misread at the end of a result file."""
    data = Path(path).read_bytes()
    if not data.strip():
        return ["empty file: no :::MLLOG lines"]
    text = data.decode("latin-1")
    last = text.rstrip("\n").rsplit("\n", 1)[-1].strip()
    if not text.endswith("\n"):
        return [f"truncated last line (no newline at the end of the file): {last[:80]!r}"]
    if TOKEN not in last:
        return [f"truncated last line (not a :::MLLOG line): {last[:80]!r}"]
    try:
        record = json.loads(last[last.index(TOKEN) + len(TOKEN):])
    except json.JSONDecodeError as exc:
        return [f"truncated last line (its JSON does not parse: {exc.msg}): {last[:80]!r}"]
    if not isinstance(record, dict) or not {"key", "time_ms"} <= record.keys():
        return [f"truncated last line (no key or time_ms): {last[:80]!r}"]
    return []


_HINTS = (
    ("compile_time_mins", "init took too long: init_stop must come less than 240 min (open "
                          "division) or 30 min (closed) after the first init_start"),
    ("'status' in v['metadata']", "run_stop has no metadata status"),
    ("s['run_started']", "no run_start before it"),
    ("s['init_stopped']", "no init_stop before it"),
)


def _summarize(message: str) -> str:
    """One line out of a multi-line message of the compliance checker."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return message.strip()
    head = lines[0]
    test = next((line[len("failed test:"):].strip() for line in lines
                 if line.startswith("failed test:")), None)
    if test is None:
        if head.startswith("Failed executing") and len(lines) > 1:
            return f"{head} {lines[1]}"
        return head
    hint = next((text for marker, text in _HINTS if marker in test), None)
    if "'epoch_num' in v['metadata']" in test:
        key = re.search(r"'([^']+)'", head)
        hint = f"{key.group(1) if key else 'a line'} has no metadata epoch_num"
    if head.startswith("failed test:"):
        return f"end-of-log check failed: {test}"
    return f"{head} {hint} (failed test: {test})" if hint else f"{head} failed test: {test}"


def _compliance(path: Path, ruleset: str) -> list[str]:
    """Reasons the official compliance checker rejects `path` under `ruleset`."""
    mlp_compliance.enqueued_configs.clear()   # module-level queue: start from empty
    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=False, werror=False)
    with _captured_logging():
        try:
            valid, _, _, _ = mlp_compliance.main(str(path), f"{USAGE}_{ruleset}/common.yaml", checker)
        except Exception as exc:  # noqa: BLE001 - the checker crashes on some malformed lines
            return [f"the compliance checker crashed: {type(exc).__name__}: {exc}"]
        finally:
            mlp_compliance.enqueued_configs.clear()
    reasons = []
    for message in [*checker.overwritable.values(), *checker.not_overwritable]:
        if message.strip() == "Log lines had parsing errors.":
            _, errors = mlp_parser.parse_file(str(path), ruleset=ruleset)
            reasons += [f"line does not parse ({error}): {line[:80]!r}" for line, error in errors] \
                or ["log lines had parsing errors"]
        else:
            reasons.append(_summarize(message))
    if valid and not reasons:
        # quiet=False keeps the warnings; the checker itself would pass the file
        reasons += [f"{_summarize(w)} (the official checker only warns about this)"
                    for w in checker.warnings.values()]
    elif not reasons:
        reasons.append("the compliance checker rejected the file without a message")
    return reasons


def summarizer_rejection(path: Path, ruleset: str) -> str:
    """Why the official result summarizer drops `path` as non-converged ("" when it
    scores it): its own reader, which runs the compliance checker (quiet) and the parser."""
    from mlperf_logging.result_summarizer.result_summarizer import _read_result_file

    mlp_compliance.enqueued_configs.clear()   # module-level queue: start from empty
    with _captured_logging():
        try:
            _read_result_file(str(path), USAGE, ruleset)
        except ValueError as exc:        # 'Compliance check failed' or 'Parse error'
            return f"{exc} (ruleset {ruleset}; `compliance/check {path}` says why)"
        except Exception as exc:  # noqa: BLE001 - the checker crashes on some malformed lines
            return f"the compliance checker crashed: {type(exc).__name__}: {exc}"
        finally:
            mlp_compliance.enqueued_configs.clear()
    return ""


def check_result_file(path: Path, rulesets: Sequence[str] = DEFAULT_RULESETS) -> list[Verdict]:
    path = Path(path)
    verdicts = [_verdict(path, "log-format", "-", log_format_problems(path))]
    for ruleset in rulesets:
        verdicts.append(_verdict(path, "compliance", ruleset, _compliance(path, ruleset)))
    return verdicts


# ---- system descriptions -----------------------------------------------------
def _system_desc(path: Path, ruleset: str) -> list[str]:
    try:
        description = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return [f"not a readable JSON file: {exc}"]
    if not isinstance(description, dict):
        return ["not a JSON object"]
    described = SystemDescriptor.from_json(description)
    with contextlib.ExitStack() as stack:
        target = path
        if uses_availability_status(ruleset):
            try:   # only the status is mapped: every other field is checked as written
                mapped = dict(description, status=for_ruleset(description, ruleset)["status"])
            except ValueError as exc:
                return [str(exc)]
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            target = tmp / path.name
            target.write_text(json.dumps(mapped, indent=2))
        elif described.status not in STATUS_4X:
            return [f"status {described.status!r} is not one of "
                    f"{', '.join(STATUS_4X)} (the vocabulary of ruleset {ruleset})"]
        with _captured_logging() as log:
            try:
                valid, _, _, _ = check_system_desc(str(target), USAGE, ruleset)
            except Exception as exc:  # noqa: BLE001 - e.g. a number where it joins strings
                hint = " (MLPerf description fields are strings)" if isinstance(exc, TypeError) else ""
                return [f"the system description checker crashed: {type(exc).__name__}: {exc}{hint}"]
    if valid:
        return []
    reasons = []
    for record in log.records:
        if record.levelno >= logging.ERROR:
            args = record.args if isinstance(record.args, tuple) else ()
            found = args[-1] if args and isinstance(args[-1], list) else [record.getMessage().strip()]
            reasons += [str(r) for r in found]
    return reasons or ["the system description checker rejected the file"]


def check_system_file(path: Path, rulesets: Sequence[str] = DEFAULT_RULESETS) -> list[Verdict]:
    return [_verdict(path, "system-desc", r, _system_desc(Path(path), r)) for r in rulesets]


# ---- packages ------------------------------------------------------------------
def is_package(folder: Path) -> bool:
    return (folder / "systems").is_dir() and (folder / "results").is_dir()


def _package_checker(folder: Path, ruleset: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mlperf_logging.package_checker", str(folder.resolve()),
               USAGE, ruleset, "--log_output", os.path.join(tmp, "package_checker.log")]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                                  timeout=PACKAGE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [f"the package checker did not finish in {PACKAGE_TIMEOUT_S} s"]
    output = (proc.stdout or "") + "\n" + (proc.stderr or "")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line[len("ERROR - "):].strip() if line.startswith("ERROR - ") else line
              for line in lines if line.startswith("ERROR")]
    if PACKAGE_OK in output and PACKAGE_FAILED not in output and proc.returncode == 0:
        return []
    if PACKAGE_FAILED in output:
        return errors or ["the package checker found errors (no ERROR line printed)"]
    last = lines[-1] if lines else "no output"
    return [f"the package checker gave no verdict (exit {proc.returncode}): {last}"] + errors


def check_package(folder: Path, rulesets: Sequence[str] = DEFAULT_RULESETS) -> list[Verdict]:
    folder = Path(folder)
    verdicts: list[Verdict] = []
    for system_file in sorted((folder / "systems").glob("*.json")):
        verdicts += check_system_file(system_file, rulesets)
    for benchmark_dir in sorted(p for p in (folder / "results").glob("*/*") if p.is_dir()):
        runs = [check_result_file(f, rulesets) for f in sorted(benchmark_dir.glob("result_*.txt"))]
        bad = [run for run in runs if any(not v.passed for v in run)]
        allowed = olympic_allowance(benchmark_dir.name)
        if len(bad) <= allowed:
            for verdict in (v for run in bad for v in run if not v.passed):
                verdict.accepted = (f"{len(bad)} non-compliant run(s) in {benchmark_dir.name}/, at "
                                    f"most {allowed} accepted under olympic scoring (the run is "
                                    "dropped from the score as the slowest)")
        verdicts += [v for run in runs for v in run]
    for ruleset in rulesets:
        if not uses_availability_status(ruleset):
            verdicts.append(_verdict(folder, "package", ruleset, _package_checker(folder, ruleset)))
    return verdicts


# ---- entry points ------------------------------------------------------------
def check_path(path: Path | str, rulesets: Sequence[str] = DEFAULT_RULESETS) -> list[Verdict]:
    """Every verdict for PATH (file, results folder or package). Raises FileNotFoundError
    when PATH does not exist and CheckError when it holds nothing checkable."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    rulesets = _check_rulesets(list(rulesets))
    if path.is_file():
        if path.suffix == ".json":
            return check_system_file(path, rulesets)
        return check_result_file(path, rulesets)
    if is_package(path):
        verdicts = check_package(path, rulesets)
        if verdicts:
            return verdicts
        raise CheckError(f"{path} looks like a package but holds no systems/*.json or result files")
    files = sorted(path.rglob("result_*.txt"))
    if not files:
        raise CheckError(f"nothing to check in {path}: no result_*.txt files below it, and it is "
                         "not a package folder (systems/ and results/)")
    return [verdict for file in files for verdict in check_result_file(file, rulesets)]


def format_table(verdicts: Sequence[Verdict], verbose: bool = False, width: int = 150) -> str:
    headers = ("TARGET", "CHECKER", "RULESET", "VERDICT")
    rows = [(v.target, v.checker, v.ruleset, v.word) for v in verdicts]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str], reason: str = "") -> str:
        text = "  ".join(c.ljust(w) for c, w in zip(cells, widths))
        return f"{text}  {reason}".rstrip()

    out = [line(headers, "REASON")]
    for verdict, row in zip(verdicts, rows):
        reason = verdict.reason if verbose or len(verdict.reason) <= width else verdict.reason[:width - 3] + "..."
        out.append(line(row, reason))
        if verbose:
            out += [f"    - {detail}" for detail in verdict.details[1:]]
        if verdict.accepted:
            out.append(f"    accepted: {verdict.accepted}")
    failed = sum(not v.ok for v in verdicts)
    accepted = sum(bool(v.accepted) for v in verdicts)
    out.append(f"{len(verdicts)} checks: {len(verdicts) - failed - accepted} passed, {failed} failed"
               + (f", {accepted} accepted under olympic scoring" if accepted else ""))
    return "\n".join(out)
