"""Two campaigns of two systems on one results folder: each one's package step keeps the other's
package (under a lock, with every system already packaged), leaves no folder of its own behind
and says which systems the package holds; a failed build of another system is not deleted."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_package import ORG, REPO_ROOT, make_campaign

from submission import campaign, package
from submission.config import resolve

from conftest import REPO, child_env

SYSTEMS = {"local_cpu": {}, "2xlocal_cpu": {"nodes": "2"}}     # systems/cpu.json on 1 and 2 nodes
STEP = ("import sys; from submission import campaign; from submission.config import resolve; "
        "nodes = sys.argv[2]; settings = {'results_dir': sys.argv[1], 'org': 'TestOrg', 'package': 'true'}; "
        "sys.exit(campaign.finish_campaign(resolve('cpu', {**settings, **({'nodes': nodes} if nodes else {})})))")


def _config(results: Path, name: str):
    return resolve("cpu", {"results_dir": str(results), "org": ORG, "package": "true", **SYSTEMS[name]})


def _packaged(results: Path) -> list[str]:
    return sorted(p.name for p in (results / "package" / ORG / "results").iterdir())


@pytest.mark.e2e
def test_two_campaigns_finishing_together_leave_both_packages_and_no_stray_folder(tmp_path):
    results = tmp_path / "results"
    for name in SYSTEMS:
        make_campaign(results, name=name)
    steps = [subprocess.Popen([sys.executable, "-c", STEP, str(results), SYSTEMS[name].get("nodes", "")],
                              cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for name in SYSTEMS]
    outputs = [step.communicate(timeout=600)[0] for step in steps]
    assert [step.returncode for step in steps] == [0, 0], outputs
    assert _packaged(results) == ["2xlocal_cpu", "local_cpu"]
    assert [p.name for p in (results / "package").iterdir() if p.is_dir()] == [ORG]
    package_lines = [line for output in outputs for line in output.splitlines() if "[campaign] package" in line]
    assert len(package_lines) == 2, outputs
    # the step that built second holds both systems, and says so
    assert any(line.endswith("(passes the MLPerf checkers): systems 2xlocal_cpu, local_cpu")
               for line in package_lines), package_lines


def test_a_campaigns_package_keeps_another_systems_failed_build(tmp_path, capsys):
    """System A's package failed the checkers (`package local_cpu` with 2 runs: kept for
    inspection); system B's campaign then packages: A's failed build is not B's to delete."""
    results = tmp_path / "results"
    make_campaign(results, name="local_cpu", minutes=[21.5, 20.0])
    make_campaign(results, name="2xlocal_cpu")
    failed = package.build_package(results, ["local_cpu"], ORG, results / "package", REPO_ROOT)
    assert not failed.passed and failed.path.name.startswith(f"{ORG}.failed-")
    assert "nothing was put at" in package.failure_text(failed, results / "package" / ORG)
    assert campaign.finish_campaign(_config(results, "2xlocal_cpu")) == 0
    assert _packaged(results) == ["2xlocal_cpu"]
    assert sorted(p.name for p in (results / "package").iterdir()) == [ORG, failed.path.name]
