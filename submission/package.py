"""Assemble an MLPerf Training submission package from a campaign's results.

    <out_root>/<org>/
      systems/<system_name>.json                         MLPerf fields only, submitter = org
      benchmarks/resnet/implementations/pytorch-<recipe>/  the code, resolved configs, README
      results/<system_name>/resnet/result_0.txt ...      the result files, byte for byte

The package is built in a hidden folder next to its destination and checked there with
submission.compliance (the MLPerf package checker and friends). Only a package that
passes is renamed into place, each file on the disk first: an existing <org>/ is moved
aside first and deleted once the new one is there (with the <org>.failed-* folders of
earlier builds whose systems it holds). One that fails is renamed
<org>.failed-<stamp>-<pid>/ for inspection, and <org>/ is left as it was; a build that
stops part-way leaves nothing. One build at a time in the folder (a lock on the folder;
a second waits): a campaign's package step keeps the systems already in <org>/, so that
two campaigns of two systems finishing together leave a package of both.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import file_lock
from .durable import put_in_place
from .names import folder_name_problem, recipe_name, recipe_name_problem
from .redaction import redacted_record
from .results import RULESET, CampaignError, CampaignRecord, read_campaign
from .run_folder import BENCHMARK, ResultsRoot
from .system_descriptor import SystemDescriptor

if TYPE_CHECKING:       # for the annotations only: the checkers are imported where they run
    from .compliance import Verdict

DEFAULT_IMPL = "pytorch-ffcv-mild"
CODE_FILES = ("run_and_time.sh", "setup.cfg", "pyproject.toml")
CODE_DIRS = ("systems", "scripts")
SOFTWARE = ("torch", "torchvision", "ffcv", "mlperf-logging", "numpy", "pyyaml", "psutil")


@dataclass
class PackageResult:
    path: Path
    verdicts: list = field(default_factory=list)   # submission.compliance Verdicts
    passed: bool = False
    systems: list[str] = field(default_factory=list)    # the systems the build holds
    left_out: list[str] = field(default_factory=list)   # "NAME (why)": of <org>/'s, not rebuilt
    previous: bool = False      # an <org>/ was there: one that fails leaves it as it was


def build_package(results_dir: Path, system_names: list[str], org: str, out_root: Path,
                  repo_root: Path, keep_packaged: bool = False) -> PackageResult:
    """Build out_root/<org>/ from results_dir/<system_name>/ for each system; check it. With
    `keep_packaged` (a campaign's package step), the systems <org>/ holds already are built
    in too, from their results folders; one whose folder cannot be packaged now is left out
    and named in `left_out`."""
    results_dir, out_root, repo_root = Path(results_dir), Path(out_root), Path(repo_root)
    problem = folder_name_problem("org", org)
    if problem:
        raise ValueError(f"cannot package: {problem}; give another with org=NAME "
                         "(a campaign's setting org=NAME)")
    if not system_names:
        raise ValueError("no system to package: name at least one results/<system_name> folder")
    systems = [_load_system(results_dir, name, org) for name in dict.fromkeys(system_names)]
    out_root.mkdir(parents=True, exist_ok=True)

    def waiting() -> None:
        print(f"package: waiting for another build in {out_root} to end", flush=True)
    with file_lock.folder_held(out_root, wait=waiting):
        left_out: list[str] = []
        if keep_packaged:
            for name in _packaged(out_root / org):
                if name in system_names:
                    continue
                try:
                    systems.append(_load_system(results_dir, name, org))
                except (ValueError, CampaignError) as exc:
                    left_out.append(f"{name} ({exc})")
        built = _build(systems, org, out_root, repo_root)
        built.left_out = left_out
        return built


def _packaged(package: Path) -> list[str]:
    """The systems whose results the package at `package` holds (none where there is none)."""
    results = package / "results"
    return sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []


def _build(systems: list[_System], org: str, out_root: Path, repo_root: Path) -> PackageResult:
    """out_root/<org>/ built from `systems` aside, checked, and put in place if it passes."""
    stamp = f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    final = out_root / org
    names = [system.name for system in systems]
    candidate = out_root / f".{org}.building-{stamp}"
    try:
        _assemble(candidate, systems, org, repo_root)
        from .compliance import check_path
        verdicts = list(check_path(candidate))
    except BaseException:
        shutil.rmtree(candidate, ignore_errors=True)
        raise
    if not (verdicts and all(v.ok for v in verdicts)):
        # kept for inspection beside <org>/, which stays as it was
        failed = out_root / f"{org}.failed-{stamp}"
        candidate.rename(failed)
        return PackageResult(path=failed, verdicts=_moved(verdicts, candidate, failed), passed=False,
                             systems=names, previous=final.exists())
    _put_in_place(candidate, final, out_root / f".{org}.old-{stamp}")
    for earlier in out_root.glob(f"{org}.failed-*"):    # superseded: its systems are in the package
        if set(_packaged(earlier)) <= set(names):
            shutil.rmtree(earlier, ignore_errors=True)
    return PackageResult(path=final, verdicts=_moved(verdicts, candidate, final), passed=True, systems=names)


def _put_in_place(new: Path, final: Path, aside: Path) -> None:
    """new -> final; an existing final is moved aside first and deleted once new is there."""
    old = None
    if final.exists() or final.is_symlink():
        old = aside
        final.rename(old)
    try:
        put_in_place(new, final)     # each file on the disk before the package counts as built
    except BaseException:
        if old is not None:
            old.rename(final)
        shutil.rmtree(new, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _moved(verdicts: list, checked: Path, now: Path) -> list:
    """The verdicts of the package checked at `checked`, naming its files where it lies `now`."""
    from .compliance import display_path

    def target(verdict: Verdict) -> str:
        return display_path(now / Path(verdict.target).resolve().relative_to(checked.resolve()))
    return [dataclasses.replace(v, target=target(v)) for v in verdicts]


def failure_text(result: PackageResult, final: Path) -> str:
    """Where a package that fails the checkers was left, and the checkers' verdicts."""
    from .compliance import format_table
    place = (f"the package at {final} is left as it was" if result.previous else
             f"nothing was put at {final}")
    return (f"the new package FAILS the MLPerf checkers: it is kept for inspection at "
            f"{result.path} (delete it when done); {place}. The checkers' verdicts:\n"
            + format_table(result.verdicts, verbose=True))


# ---------------------------------------------------------------------------
@dataclass
class _System:
    name: str                     # results/<name>/: the MLPerf system_name
    folder: Path
    results: list[Path]
    description: SystemDescriptor   # as run: 2.0.0 vocabulary, submitter = org
    campaign: CampaignRecord

    @property
    def settings(self) -> dict[str, Any]:
        return self.campaign.settings

    @property
    def short_name(self) -> str:
        return self.campaign.system or self.name

    @property
    def impl(self) -> str:
        recipe = self.settings.get("recipe")
        return f"pytorch-{recipe_name(recipe)}" if recipe else DEFAULT_IMPL


def _load_system(results_dir: Path, name: str, org: str) -> _System:
    from .system_json import for_ruleset

    files = ResultsRoot(results_dir).campaign(name)
    folder = files.path
    if not name or Path(name).name != name or name.startswith("."):
        hint = (f"; for {name}, pass results={Path(name).parent} {Path(name).name}"
                if Path(name).name and not Path(name).name.startswith(".") else "")
        raise ValueError(f"{name!r} is not a system name (a folder directly under {results_dir}){hint}")
    if not folder.is_dir():
        raise ValueError(f"cannot package system {name!r}: no results folder {folder}")
    results = files.result_files()
    if not results:
        raise ValueError(f"cannot package system {name!r}: it has no results "
                         f"(no result_*.txt in {files.benchmark}); run its campaign first")
    system_file = files.system
    campaign_file = files.record
    for needed, what in ((system_file, "the system description as run"),
                         (campaign_file, "the configuration the runs used")):
        if not needed.is_file():
            raise ValueError(f"cannot package system {name!r}: {needed} ({what}) is missing")
    description = SystemDescriptor.from_json(for_ruleset(_read_json(system_file), RULESET)).replaced(
        submitter=org)
    campaign = read_campaign(folder)
    if campaign is None:        # its file was found above; read_campaign says None only without one
        raise ValueError(f"cannot package system {name!r}: {campaign_file} is missing")
    _refuse_unsafe_names(campaign, campaign_file)

    # The logs cannot be edited: refuse a package that would contradict them.
    logged = _logged_submission(results[0])
    problems = []
    if logged.get("submission_org") not in (None, org):
        problems.append(f"the runs were logged for org {logged['submission_org']!r}, "
                        f"not {org!r} (package them with org={logged['submission_org']}; "
                        f"a campaign's setting org={logged['submission_org']})")
    if logged.get("submission_platform") not in (None, name):
        problems.append(f"the runs were logged for platform {logged['submission_platform']!r}, "
                        f"but their folder is {name!r}")
    if logged.get("submission_division") not in (None, description.division):
        problems.append(f"the runs were logged in division {logged['submission_division']!r}, "
                        f"but system.json says {description.division!r}")
    if problems:
        raise ValueError(f"cannot package system {name!r}: " + "; ".join(problems))
    return _System(name, folder, results, description, campaign)


def _refuse_unsafe_names(campaign: CampaignRecord, record: Path) -> None:
    """A ValueError when a name in `record` (any results= folder's, so not trusted) would
    become a folder or a command outside the safe names (names.py)."""
    recipe = campaign.settings.get("recipe")
    if recipe is not None:
        problem = recipe_name_problem(str(recipe))
        if problem:
            raise ValueError(f"cannot package: recipe {recipe!r} in {record} {problem}; "
                             "a campaign the harness ran records one")
    if campaign.system:
        problem = folder_name_problem("system", campaign.system)
        if problem:
            raise ValueError(f"cannot package: system {campaign.system!r} in {record} names a folder "
                             f"that is not safe ({problem}); a campaign the harness ran records a safe one")


def _assemble(root: Path, systems: list[_System], org: str, repo_root: Path) -> None:
    (root / "systems").mkdir(parents=True)
    for system in systems:
        (root / "systems" / f"{system.name}.json").write_text(
            json.dumps(system.description.to_json(), indent=2) + "\n")
        target = root / "results" / system.name / BENCHMARK
        target.mkdir(parents=True)
        for result in system.results:
            shutil.copyfile(result, target / result.name)

    by_impl: dict[str, list[_System]] = {}
    for system in systems:
        by_impl.setdefault(system.impl, []).append(system)
    for impl, members in by_impl.items():
        impl_dir = root / "benchmarks" / BENCHMARK / "implementations" / impl
        _copy_code(repo_root, impl_dir)
        (impl_dir / "configs").mkdir()
        for system in members:
            (impl_dir / "configs" / f"{system.name}.json").write_text(
                json.dumps(redacted_record(system.campaign.to_dict(), repo_root), indent=2) + "\n")
        (impl_dir / "README.md").write_text(_readme(impl, members, org, repo_root))


def _copy_code(repo_root: Path, dest: Path) -> None:
    source = repo_root / "submission"
    if not source.is_dir():
        raise ValueError(f"cannot package: no code at {source}")
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_file() and path.suffix in (".py", ".yaml") and "__pycache__" not in rel.parts:
            _copy(path, dest / "submission" / rel)
    for name in CODE_DIRS:
        folder = repo_root / name
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder)
                if path.is_file() and "__pycache__" not in rel.parts:
                    _copy(path, dest / name / rel)
    for name in CODE_FILES:
        if (repo_root / name).is_file():
            _copy(repo_root / name, dest / name)
    if (repo_root / "README.md").is_file():   # README.md of the implementation is ours
        _copy(repo_root / "README.md", dest / "HARNESS_README.md")


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def _readme(impl: str, systems: list[_System], org: str, repo_root: Path) -> str:
    from . import settings as declared
    from .score import summarize

    recipe = recipe_name(str(systems[0].settings.get("recipe", "mild")))
    lines = [f"# ResNet-50, {impl} ({org})", "",
             f"PyTorch ResNet-50 trained with the `{recipe}` recipe "
             f"(`submission/recipes/{recipe}.yaml`), FFCV data loading, timed and logged "
             "with `mlperf_logging.mllog` as MLPerf Training requires.", "",
             "## Results in this package", "",
             "| system | short name | runs | seeds | score (min) | valid MLPerf score |",
             "|---|---|---|---|---|---|"]
    for system in systems:
        summary = summarize(system.folder)
        score = "—" if summary.score_minutes is None else f"{summary.score_minutes:.3f}"
        seeds = ", ".join(str(r.seed) for r in summary.runs)
        lines.append(f"| {system.name} | {system.short_name} | {len(summary.runs)} | {seeds} | "
                     f"{score} | {'yes' if summary.valid else 'no: ' + '; '.join(summary.reasons)} |")
    lines += ["", "Score: MLPerf olympic mean of run_stop - run_start (minutes) over 5 runs.", "",
              "## How to reproduce", "",
              "From this folder (the harness code as it produced the runs), on the system:", "",
              "```"]
    for system in systems:
        lines.append(f"./run_and_time.sh system={system.short_name}")
    lines += ["```", "",
              "`run_and_time.sh` sets up the environment (`scripts/bootstrap.sh`), prepares the "
              "data and runs the 5 timed runs; results go to `results/<system_name>/resnet/`. "
              "To repeat the exact seeds of these runs, add them:", "", "```"]
    for system in systems:
        if system.campaign.seeds:
            lines.append(f"./run_and_time.sh system={system.short_name} "
                         f"seeds={','.join(str(s) for s in system.campaign.seeds)}")
    lines += ["```", "",
              "`configs/<system_name>.json` is each campaign's record (campaign.json): seeds and "
              "every resolved setting, with the system description as run. "
              "Harness documentation: `HARNESS_README.md`.", "",
              f"## Recipe `{recipe}` (as resolved for {systems[0].name})", "",
              "| setting | value |", "|---|---|"]
    for key, value in systems[0].settings.items():
        if key in declared.DECLARED and declared.kind(key) == declared.RECIPE:
            lines.append(f"| {key} | {value} |")
    lines += ["", "Systems may override values that must scale (batch, workers, data, and for "
              "small demonstration systems duration and resolution); see `configs/`.", "",
              "## Software", "",
              "Versions installed where this package was built (the system description's "
              "`framework` and `other_software_stack` fields record those of the runs):", "",
              f"- Python {platform.python_version()}"]
    for name in SOFTWARE:
        lines.append(f"- {name} {_version(name)}")
    lines.append(f"- harness code: {_git_revision(repo_root)}")
    for system in systems:
        framework = system.description.framework or "—"
        other = system.description.other_software_stack or "—"
        lines.append(f"- {system.name} as run: framework {framework}; other software {other}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
def _logged_submission(result: Path) -> dict[str, Any]:
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    keys = ("submission_org", "submission_platform", "submission_division")
    loglines, _ = parse_file(str(result), ruleset=RULESET)
    found: dict[str, Any] = {}
    for line in loglines:
        if line.key in keys and line.key not in found:
            found[line.key] = line.value.get("value")
    return found


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} should hold a JSON object")
    return data


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_revision(repo_root: Path) -> str:
    try:
        head = subprocess.run(["git", "-C", str(repo_root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "not a git checkout, or no commit yet"
        dirty = subprocess.run(["git", "-C", str(repo_root), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (git unavailable)"
    return f"git {head.stdout.strip()}" + (" with uncommitted changes" if dirty else "")
