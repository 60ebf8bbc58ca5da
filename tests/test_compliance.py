"""submission.compliance and compliance/check: a hand-built open-division ResNet log passes
the official checker for rulesets 2.0.0 and 4.0.0; broken variants are rejected with a
reason that names the problem; packages go through the official package checker."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from submission import compliance, config
from submission.cli import main as cli_main
from submission.compliance import Verdict, check_path
from submission.system_json import for_ruleset

REPO_ROOT = Path(__file__).resolve().parent.parent
CHECK = REPO_ROOT / "compliance" / "check"
T0 = 1_650_000_000_000          # init_start, ms
MINUTE = 60_000


def make_log(*, init_minutes: float = 2.0, run_stop: bool = True, two_run_starts: bool = False,
             eval_epoch_num: bool = True, epochs: int = 3, org: str = "TestOrg",
             platform: str = "test_system") -> str:
    """One run of an open-division ResNet log with plausible times: init, then `epochs`
    epochs of 4 minutes each with an evaluation after each."""
    records = []

    def add(t, key, value=None, event="POINT_IN_TIME", **meta):
        records.append({"namespace": "", "time_ms": int(t), "event_type": event, "key": key,
                        "value": value, "metadata": {"file": "submission/train.py",
                                                     "lineno": len(records) + 1, **meta}})

    add(T0, "cache_clear", True)
    add(T0, "init_start", event="INTERVAL_START")
    for key, value in (("submission_org", org), ("submission_platform", platform),
                       ("submission_division", "open"), ("submission_status", "cloud"),
                       ("submission_benchmark", "resnet"), ("number_of_nodes", 1),
                       ("accelerators_per_node", 8), ("seed", 1234), ("global_batch_size", 2048),
                       ("gradient_accumulation_steps", 1), ("train_samples", 1281167),
                       ("eval_samples", 50000), ("opt_name", "sgd")):
        add(T0 + 5, key, value)
    start = T0 + init_minutes * MINUTE
    add(start, "init_stop", event="INTERVAL_END")
    add(start, "run_start", event="INTERVAL_START")
    if two_run_starts:
        add(start + 10, "run_start", event="INTERVAL_START")
    t = start
    for epoch in range(1, epochs + 1):
        add(t, "epoch_start", event="INTERVAL_START", epoch_num=epoch)
        t += 4 * MINUTE
        add(t, "epoch_stop", event="INTERVAL_END", epoch_num=epoch)
        add(t, "eval_start", event="INTERVAL_START", epoch_num=epoch)
        t += 10_000
        accuracy_meta = {"epoch_num": epoch} if eval_epoch_num else {}
        add(t, "eval_accuracy", 0.6 + 0.05 * epoch, **accuracy_meta)
        add(t, "eval_stop", event="INTERVAL_END", epoch_num=epoch)
    if run_stop:
        add(t + 1, "run_stop", event="INTERVAL_END", status="success", epoch_num=epochs)
    return "".join(":::MLLOG " + json.dumps(r) + "\n" for r in records)


def write(folder: Path, text: str, name: str = "result_0.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def run_check(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHECK), *map(str, args)], capture_output=True, text=True, timeout=120)


def failures(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.passed]


# ---- a valid log -----------------------------------------------------------
def test_valid_log_passes_both_rulesets(tmp_path):
    path = write(tmp_path, make_log())
    verdicts = check_path(path)
    assert {(v.checker, v.ruleset) for v in verdicts} == {
        ("log-format", "-"), ("compliance", "2.0.0"), ("compliance", "4.0.0")}
    assert not failures(verdicts), failures(verdicts)
    assert all(v.reason == "" for v in verdicts)


@pytest.mark.e2e
def test_valid_log_passes_through_the_command(tmp_path):
    path = write(tmp_path, make_log())
    proc = run_check(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout
    assert proc.stdout.count("PASS") == 3
    assert not list(tmp_path.glob("*.log")) and not list(Path.cwd().glob("compliance_checker.log"))


@pytest.mark.e2e
def test_ruleset_option_selects_the_rulesets(tmp_path):
    path = write(tmp_path, make_log())
    verdicts = check_path(path, rulesets=("2.1.0",))
    assert {v.ruleset for v in verdicts if v.checker == "compliance"} == {"2.1.0"}
    proc = run_check(path, "--ruleset", "3.0.0", "--ruleset", "4.0.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3.0.0" in proc.stdout and "4.0.0" in proc.stdout and "2.0.0" not in proc.stdout
    proc = run_check(path, "--ruleset", "9.9.9")
    assert proc.returncode == 2 and "unknown ruleset 9.9.9" in proc.stderr


def test_check_takes_its_options_as_key_value_words_and_the_old_flags_with_a_notice(tmp_path, capsys):
    path = write(tmp_path, make_log())
    assert cli_main(["check", str(path), "rulesets=3.0.0,4.0.0", "verbose=true"]) == 0
    new = capsys.readouterr()
    rows = [line for line in new.out.splitlines() if " compliance " in line]
    assert [line.split()[2] for line in rows] == ["3.0.0", "4.0.0"] and new.err == ""
    # the flags of earlier versions, each repeated --ruleset adding to the list
    assert cli_main(["check", str(path), "--ruleset", "3.0.0", "--ruleset", "4.0.0", "-v"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out
    assert "note: --ruleset is now rulesets=VALUE" in old.err and "note: -v is now verbose=true" in old.err
    assert cli_main(["check", str(path), str(path)]) == 2
    assert "check takes one PATH" in capsys.readouterr().err


def test_init_just_inside_the_open_limit_passes(tmp_path):
    assert not failures(check_path(write(tmp_path, make_log(init_minutes=239))))


# ---- broken logs -----------------------------------------------------------
def _truncated() -> str:
    text = make_log()
    return text[:-25]               # the run_stop line cut in the middle, no newline


def _cut_before_token() -> str:
    return make_log() + ":::MLL"    # a line cut before the token: the official parser skips it


BROKEN = {
    "missing_run_stop": (lambda: make_log(run_stop=False), ("run_stop",)),
    "eval_accuracy_without_epoch_num": (lambda: make_log(eval_epoch_num=False),
                                        ("eval_accuracy", "epoch_num")),
    "init_longer_than_240_min": (lambda: make_log(init_minutes=241), ("init_stop", "240 min")),
    "truncated_last_line": (_truncated, ("truncated last line",)),
    "cut_before_the_token": (_cut_before_token, ("truncated last line",)),
    "two_run_starts": (lambda: make_log(two_run_starts=True), ("run_start", "found 2")),
}


@pytest.mark.e2e
@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_log_is_rejected_with_the_reason(variant, tmp_path):
    build, words = BROKEN[variant]
    path = write(tmp_path, build())
    failed = failures(check_path(path))
    assert failed, f"{variant} passed every check"
    assert any(all(w in v.reason for w in words) for v in failed), [v.reason for v in failed]

    proc = run_check(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout
    fail_rows = [line for line in proc.stdout.splitlines() if "FAIL" in line]
    assert any(all(w in line for w in words) for line in fail_rows), proc.stdout


def test_two_run_starts_fail_although_the_official_checker_only_warns(tmp_path):
    path = write(tmp_path, make_log(two_run_starts=True))
    for ruleset in ("2.0.0", "4.0.0"):
        [verdict] = [v for v in check_path(path, (ruleset,)) if v.checker == "compliance"]
        assert not verdict.passed and "only warns" in verdict.reason


def test_truncated_file_fails_log_format_only_there(tmp_path):
    good = write(tmp_path / "good", make_log())
    bad = write(tmp_path / "bad", make_log() + ":::MLLOG {\"namespace\": \"\", \"time_ms\": 16")
    assert not failures(check_path(good))
    [fmt] = [v for v in check_path(bad) if v.checker == "log-format"]
    assert not fmt.passed and fmt.reason.startswith("truncated last line")


# ---- folders, packages, errors ---------------------------------------------------
@pytest.mark.e2e
def test_results_folder_checks_every_file(tmp_path):
    folder = tmp_path / "results" / "test_system" / "resnet"
    write(folder, make_log(), "result_0.txt")
    write(folder, make_log(run_stop=False), "result_1.txt")
    verdicts = check_path(tmp_path / "results")
    assert {Path(v.target).name for v in verdicts} == {"result_0.txt", "result_1.txt"}
    assert {Path(v.target).name for v in failures(verdicts)} == {"result_1.txt"}
    proc = run_check(folder)
    assert proc.returncode == 1 and proc.stdout.count("result_0.txt") == 3


def _package(root: Path, runs: int = 5) -> Path:
    org = root / "TestOrg"
    description = dict(for_ruleset(config.resolve("p4d", {}).descriptor.to_json(), "2.0.0"), submitter="TestOrg")
    system = description["system_name"]
    (org / "systems").mkdir(parents=True)
    (org / "systems" / f"{system}.json").write_text(json.dumps(description, indent=2))
    write(org / "benchmarks" / "resnet" / "implementations" / "pytorch", "print('train')\n", "train.py")
    for i in range(runs):
        write(org / "results" / system / "resnet", make_log(org="TestOrg", platform=system), f"result_{i}.txt")
    return org


def test_valid_package_passes_every_checker(tmp_path):
    org = _package(tmp_path)
    verdicts = check_path(org)
    assert not failures(verdicts), failures(verdicts)
    kinds = {(v.checker, v.ruleset) for v in verdicts}
    assert {("system-desc", "2.0.0"), ("system-desc", "4.0.0"), ("package", "2.0.0"),
            ("compliance", "2.0.0"), ("compliance", "4.0.0")} <= kinds
    assert len([v for v in verdicts if v.checker == "log-format"]) == 5


@pytest.mark.e2e
def test_package_checker_verdict_is_read_not_its_exit_status(tmp_path):
    org = _package(tmp_path, runs=4)      # ResNet needs exactly 5 result files
    proc = run_check(org, "--ruleset", "2.0.0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [package_row] = [line for line in proc.stdout.splitlines() if " package " in line]
    assert "FAIL" in package_row and "Incorrect number of files" in package_row
    # every other check passes: the failure comes from the package checker's verdict alone
    assert proc.stdout.count("FAIL") == 1


def test_system_description_with_a_bad_status_is_rejected(tmp_path):
    org = _package(tmp_path)
    [system_file] = (org / "systems").glob("*.json")
    system_file.write_text(json.dumps(dict(json.loads(system_file.read_text()), status="available")))
    verdicts = compliance.check_system_file(system_file, ("2.0.0", "4.0.0"))
    assert [v.passed for v in verdicts] == [False, False]
    assert all("available" in v.reason for v in verdicts)


@pytest.mark.e2e
def test_nonexistent_path_exits_2_with_a_message(tmp_path):
    missing = tmp_path / "no_such_results"
    proc = run_check(missing)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and str(missing) in proc.stderr
    with pytest.raises(FileNotFoundError):
        check_path(missing)


@pytest.mark.e2e
def test_folder_without_result_files_exits_2(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    proc = run_check(tmp_path)
    assert proc.returncode == 2 and "nothing to check" in proc.stderr
    assert cli_main(["check", str(tmp_path)]) == 2


# ---- olympic scoring in a package --------------------------------------------------
def _break_runs(org: Path, indices) -> None:
    [folder] = (org / "results").glob("*/resnet")
    for i in indices:
        write(folder, make_log(eval_epoch_num=False, org="TestOrg", platform=folder.parent.name),
              f"result_{i}.txt")


@pytest.mark.e2e
def test_one_non_compliant_run_is_reported_but_accepted_as_the_package_checker_does(tmp_path):
    org = _package(tmp_path)
    _break_runs(org, [3])
    verdicts = check_path(org, ("2.0.0",))
    [package] = [v for v in verdicts if v.checker == "package"]
    assert package.passed                                  # the official checker accepts it
    accepted = [v for v in verdicts if v.accepted]
    assert accepted and {Path(v.target).name for v in accepted} == {"result_3.txt"}
    assert all(not v.passed and "epoch_num" in v.reason for v in accepted)
    assert not [v for v in verdicts if not v.ok]
    proc = run_check(org, "--ruleset", "2.0.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "result_3.txt" in line and " compliance " in line)
    assert "ACCEPTED" in row and "epoch_num" in row
    assert "accepted under olympic scoring" in proc.stdout and "FAIL" not in proc.stdout


def test_two_non_compliant_runs_fail_the_package(tmp_path):
    org = _package(tmp_path)
    _break_runs(org, [1, 3])
    verdicts = check_path(org, ("2.0.0",))
    [package] = [v for v in verdicts if v.checker == "package"]
    assert not package.passed and "do not comply" in package.reason
    failed = {Path(v.target).name for v in verdicts if not v.ok and v.checker == "compliance"}
    assert failed == {"result_1.txt", "result_3.txt"} and not any(v.accepted for v in verdicts)


def test_a_lone_file_outside_a_package_is_judged_strictly(tmp_path):
    org = _package(tmp_path)
    _break_runs(org, [3])
    [folder] = (org / "results").glob("*/resnet")
    assert cli_main(["check", str(folder / "result_3.txt"), "--ruleset", "2.0.0"]) == 1
    assert cli_main(["check", str(folder), "--ruleset", "2.0.0"]) == 1
