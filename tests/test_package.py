"""submission.package: a package built from hand-written logs passes the official
MLPerf package checker, and the official result summarizer gives our score."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from submission import package, score

try:
    from tests.mlperf_logs import ORG, SYSTEM_NAME, write_runs
except ImportError:   # tests/ on sys.path instead of the repository root
    from mlperf_logs import ORG, SYSTEM_NAME, write_runs

REPO_ROOT = Path(__file__).resolve().parent.parent
MINUTES = [21.5, 20.0, 23.25, 19.0, 22.0]
SEEDS = [3001, 3002, 3003, 3004, 3005]

# The MLPerf system description of a small test machine: the fields of systems/cpu.json.
SYSTEM_FILLED = {
    "host_processors_per_node": "1",
    "host_processor_model_name": "Test CPU 4000",
    "host_processor_core_count": "8",
    "host_processor_vcpu_count": "16",
    "host_processor_frequency": "3000 MHz",
    "host_memory_capacity": "64 GiB",
    "host_storage_type": "NVMe SSD",
    "host_storage_capacity": "1 TB",
    "framework": "PyTorch 2.14.1",
    "operating_system": "Debian 12",
}


def _system_json() -> dict:
    described = json.loads((REPO_ROOT / "systems" / "cpu.json").read_text())
    described.pop("harness", None)
    described.update(SYSTEM_FILLED, submitter="", system_name=SYSTEM_NAME, division="open",
                     status="onprem", number_of_nodes=1, accelerators_per_node=0)
    return described


def make_campaign(results_dir: Path, minutes=MINUTES, name=SYSTEM_NAME, **log_kwargs) -> Path:
    folder = results_dir / name
    write_runs(folder, minutes, seeds=SEEDS[:len(minutes)], platform=name, **log_kwargs)
    (folder / "system.json").write_text(json.dumps(_system_json(), indent=2))
    (folder / "campaign.json").write_text(json.dumps({
        "system": "cpu", "system_name": name, "seeds": SEEDS[:len(minutes)],
        "config": {"system": "cpu",
                   "settings": {"recipe": "mild", "org": ORG, "runs": 5, "lr": 2.048,
                                "label_smoothing": 0.08, "price_usd_per_hour": 1.2}},
        "created": "2024-01-01T00:00:00+00:00"}, indent=2))
    attempts = folder / "attempts"                       # partial logs: never packaged
    attempts.mkdir()
    (attempts / "result_2-20240101-000000.txt").write_text(":::MLLOG {}\n")
    return folder


class _Verdict:
    def __init__(self, passed):
        self.target, self.checker, self.ruleset = "", "stub", "2.0.0"
        self.passed, self.reason = passed, ""


@pytest.fixture(scope="module", autouse=True)
def collaborators():
    """submission.compliance (and system_json) when written; stand-ins otherwise."""
    real = {name: importlib.util.find_spec(f"submission.{name}") is not None
            for name in ("compliance", "system_json")}
    with pytest.MonkeyPatch.context() as mp:
        if not real["compliance"]:
            stub = types.ModuleType("submission.compliance")
            stub.check_path = lambda path, rulesets=("2.0.0", "4.0.0"): [_Verdict(True)]
            mp.setitem(sys.modules, "submission.compliance", stub)
        if not real["system_json"]:
            stub = types.ModuleType("submission.system_json")
            stub.for_ruleset = lambda d, r: {k: (str(v) if isinstance(v, int) else v)
                                             for k, v in d.items() if k != "harness"}
            mp.setitem(sys.modules, "submission.system_json", stub)
        yield real


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("package")
    results = tmp / "results"
    make_campaign(results)
    result = package.build_package(results, [SYSTEM_NAME], ORG, tmp / "out", REPO_ROOT)
    return tmp, results, result


def _run(args, cwd):
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    return done.stdout + done.stderr


@pytest.mark.e2e
def test_package_checker_finds_no_errors(built):
    tmp, _, result = built
    output = _run(["mlperf_logging.package_checker", str(result.path), "training", "2.0.0",
                   "--log_output", str(tmp / "package_checker.log")], cwd=tmp)
    assert "PACKAGE CHECKER FOUND NO ERRORS" in output, output
    assert "ERROR" not in output.replace("NO ERRORS", ""), output


@pytest.mark.e2e
def test_result_summarizer_gives_our_score(built):
    tmp, results, result = built
    cwd = tmp / "summarizer"
    cwd.mkdir()
    output = _run(["mlperf_logging.result_summarizer", str(result.path), "training", "2.0.0"], cwd=cwd)
    rows = json.loads((cwd / "summary.json").read_text())
    assert len(rows) == 1, output
    official = rows[0].get("resnet", rows[0].get("resnet:time_to_train"))
    ours = score.summarize(results / SYSTEM_NAME).score_minutes
    assert ours == pytest.approx((20.0 + 21.5 + 22.0) / 3)
    assert official == pytest.approx(ours, abs=1e-3), output


def test_compliance_verdicts(built, collaborators):
    _, _, result = built
    assert result.verdicts, "check_path returned no verdict"
    if collaborators["compliance"]:
        failed = [(v.checker, v.ruleset, v.target, v.reason) for v in result.verdicts if not v.passed]
        assert result.passed and not failed, failed


def test_layout(built):
    tmp, results, result = built
    root = tmp / "out" / ORG
    assert result.path == root
    assert sorted(p.name for p in root.iterdir()) == ["benchmarks", "results", "systems"]
    assert [p.name for p in (tmp / "out").iterdir()] == [ORG]      # no temporary or old folder

    system = json.loads((root / "systems" / f"{SYSTEM_NAME}.json").read_text())
    assert system["submitter"] == ORG
    assert system["status"] == "onprem"
    assert "harness" not in system
    assert system["host_processor_model_name"] == "Test CPU 4000"

    packaged = root / "results" / SYSTEM_NAME / "resnet"
    assert sorted(p.name for p in packaged.iterdir()) == [f"result_{i}.txt" for i in range(5)]
    assert sorted(p.name for p in (root / "results" / SYSTEM_NAME).iterdir()) == ["resnet"]
    for i in range(5):
        source = results / SYSTEM_NAME / "resnet" / f"result_{i}.txt"
        assert (packaged / source.name).read_bytes() == source.read_bytes()


def test_implementation(built):
    tmp, results, _ = built
    impl = tmp / "out" / ORG / "benchmarks" / "resnet" / "implementations" / "pytorch-mild"
    assert impl.is_dir()
    for rel in ("submission/score.py", "submission/package.py", "submission/config.py",
                "submission/recipes/mild.yaml", "systems/cpu.json", "setup.cfg"):
        assert (impl / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), rel
    copied = [p for p in (impl / "submission").rglob("*") if p.is_file()]
    assert copied and all(p.suffix in (".py", ".yaml") for p in copied)
    assert not list(impl.rglob("__pycache__"))
    if (REPO_ROOT / "run_and_time.sh").is_file():
        assert (impl / "run_and_time.sh").read_bytes() == (REPO_ROOT / "run_and_time.sh").read_bytes()

    config = json.loads((impl / "configs" / f"{SYSTEM_NAME}.json").read_text())
    assert config == json.loads((results / SYSTEM_NAME / "campaign.json").read_text())

    readme = (impl / "README.md").read_text()
    assert "./run_and_time.sh system=cpu" in readme
    assert "seeds=3001,3002,3003,3004,3005" in readme
    assert "`mild`" in readme and "| label_smoothing | 0.08 |" in readme
    assert "mlperf-logging 4.1.68" in readme
    assert "21.167" in readme                            # the olympic score


def test_no_results_is_refused(tmp_path):
    results = tmp_path / "results"
    (results / "bare" / "resnet").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"'bare': it has no results \(no result_\*\.txt"):
        package.build_package(results, ["bare"], ORG, tmp_path / "out", REPO_ROOT)
    with pytest.raises(ValueError, match="no results folder"):
        package.build_package(results, ["missing"], ORG, tmp_path / "out", REPO_ROOT)
    assert not (tmp_path / "out" / ORG).exists()


def test_missing_system_description_is_refused(tmp_path):
    results = tmp_path / "results"
    (make_campaign(results) / "system.json").unlink()
    with pytest.raises(ValueError, match="system.json"):
        package.build_package(results, [SYSTEM_NAME], ORG, tmp_path / "out", REPO_ROOT)


def test_org_must_match_the_logs(tmp_path):
    results = tmp_path / "results"
    make_campaign(results)
    with pytest.raises(ValueError, match="logged for org 'TestOrg', not 'Other'"):
        package.build_package(results, [SYSTEM_NAME], "Other", tmp_path / "out", REPO_ROOT)


def test_rebuild_replaces_the_old_package(tmp_path):
    results = tmp_path / "results"
    make_campaign(results)
    out = tmp_path / "out"
    (out / ORG / "results" / "stale").mkdir(parents=True)
    result = package.build_package(results, [SYSTEM_NAME], ORG, out, REPO_ROOT)
    assert not (result.path / "results" / "stale").exists()
    assert (result.path / "results" / SYSTEM_NAME / "resnet" / "result_4.txt").is_file()
    assert [p.name for p in out.iterdir()] == [ORG]


def test_failed_build_keeps_the_previous_package(tmp_path):
    results = tmp_path / "results"
    make_campaign(results)
    out = tmp_path / "out"
    (out / ORG).mkdir(parents=True)
    (out / ORG / "previous.txt").write_text("kept")
    no_code = tmp_path / "empty_repo"                    # fails while assembling
    no_code.mkdir()
    with pytest.raises(ValueError, match="no code at"):
        package.build_package(results, [SYSTEM_NAME], ORG, out, no_code)
    assert [p.name for p in out.iterdir()] == [ORG]
    assert (out / ORG / "previous.txt").read_text() == "kept"


def _file_size_limit(limit: int):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.e2e
def test_full_disk_while_packaging_keeps_the_previous_package(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: the copy of the code fails part-way; the
    error is clear, and the previous, checked package stays in place untouched."""
    results = tmp_path / "results"
    make_campaign(results)
    out = tmp_path / "out"
    package.build_package(results, [SYSTEM_NAME], ORG, out, REPO_ROOT)
    before = {p: p.read_bytes() for p in (out / ORG).rglob("*") if p.is_file()}
    done = subprocess.run([sys.executable, "-m", "submission", "package", SYSTEM_NAME, "--org", ORG,
                           "--results", str(results), "--out", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_file_size_limit(4000))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "File too large" in done.stderr and "Traceback" not in done.stderr
    after = {p: p.read_bytes() for p in (out / ORG).rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in out.iterdir()) == [ORG]       # no half-built folder left


def test_a_package_that_fails_the_checkers_leaves_the_previous_one_and_says_why(tmp_path, capsys):
    from submission.cli import main as cli_main
    results, out = tmp_path / "results", tmp_path / "out"
    make_campaign(results, minutes=MINUTES[:2])          # the package checker wants 5 runs
    (out / ORG).mkdir(parents=True)
    (out / ORG / "previous.txt").write_text("kept")
    args = ["package", SYSTEM_NAME, "--results", str(results), "--out", str(out)]
    assert cli_main(args + ["--org", ORG]) == 1
    printed = capsys.readouterr().out
    assert [p.name for p in (out / ORG).iterdir()] == ["previous.txt"]
    failed = [p for p in out.iterdir() if p != out / ORG]
    assert len(failed) == 1 and failed[0].name.startswith(f"{ORG}.failed-")
    assert sorted(p.name for p in (failed[0] / "results" / SYSTEM_NAME / "resnet").iterdir()) == [
        "result_0.txt", "result_1.txt"]
    assert f"FAILS the MLPerf checkers: it is kept for inspection at {failed[0]}" in printed
    assert f"the package at {out / ORG} is left as it was" in printed
    assert re.search(r"package +2\.0\.0 +FAIL", printed) and "found 2, expected 5" in printed

    assert cli_main(args + ["org=Other"]) == 2      # hints name the command's option
    assert "package them with org=TestOrg" in capsys.readouterr().err
    assert cli_main(args + ["org=Acme/Labs"]) == 2
    assert "give another with org=NAME" in capsys.readouterr().err
    assert failed[0].name in printed.replace(str(out) + "/", "")     # the verdicts name it too

    make_campaign(tmp_path / "complete", minutes=MINUTES)             # a campaign that passes
    assert cli_main(["package", SYSTEM_NAME, "--results", str(tmp_path / "complete"),
                     "--out", str(out), "--org", ORG]) == 0
    assert [p.name for p in out.iterdir()] == [ORG]                   # the failed build is gone
