"""Two nodes on two network stacks (issue 71, items 8 and 11): two network namespaces joined by a
veth pair (10.77.0.1 and 10.77.0.2), one hostname for both as on cloned VMs, each node's
/etc/hosts mapping it to 127.0.0.1 (a mount namespace of its own, `unshare -m` and a bind mount),
so that gloo left alone advertises a loopback address. The real campaign command runs on each,
with no GLOO_SOCKET_IFNAME set by hand; then node 1 is lost mid-run (its link cut, so that no
connection closes, and every process in its namespace SIGKILLed, as a machine that vanishes) and
the same commands resume. Traffic goes only between the namespaces made here, removed at the end.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, cannot_set_up, child_env, one_worker_at_a_time, quick_settings, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.loaders_interpreted, pytest.mark.timeout(1800)]

ADDRESSES = ("10.77.0.1", "10.77.0.2")
LOST_AFTER_S = 20          # lost_node_seconds of these campaigns (at least 10)
RUN_WAIT_S = 600           # the test's own bound on one campaign command here (2 busy cores)


@dataclass(frozen=True)
class Nodes:
    namespaces: tuple[str, str]
    links: tuple[str, str]
    hosts: Path                 # the /etc/hosts both nodes see


def _ensure_ip(tmp_path_factory) -> str:
    """The reason namespaces cannot be made here, or "" when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if not shutil.which("ip") and shutil.which("apt-get"):
        with one_worker_at_a_time(tmp_path_factory, "apt-get"):
            subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "iproute2"],
                           capture_output=True, timeout=600, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if not shutil.which("ip") or not shutil.which("unshare"):
        return "iproute2's `ip` or util-linux's `unshare` is missing and could not be installed"
    return ""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def nodes(tmp_path, tmp_path_factory) -> Iterator[Nodes]:
    why = _ensure_ip(tmp_path_factory)
    if why:
        cannot_set_up(why)
    tag = f"{os.getpid() % 100000}"
    spaces, links = (f"tn{tag}a", f"tn{tag}b"), (f"tv{tag}a", f"tv{tag}b")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 {socket.gethostname()}\n")
    try:
        for space in spaces:
            _ip("netns", "add", space)
        _ip("link", "add", links[0], "type", "veth", "peer", "name", links[1])
        for space, link, address in zip(spaces, links, ADDRESSES):
            _ip("link", "set", link, "netns", space)
            _ip("-n", space, "addr", "add", f"{address}/24", "dev", link)
            _ip("-n", space, "link", "set", link, "up")
            _ip("-n", space, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, OSError) as failed:
        _remove(spaces)
        cannot_set_up(f"network namespaces cannot be made here: {getattr(failed, 'stderr', failed)!r}")
    try:
        yield Nodes(spaces, links, hosts)
    finally:
        _remove(spaces)


def _remove(spaces: tuple[str, str]) -> None:
    """Every process left in the namespaces (all started by this test) killed, then the
    namespaces deleted, and their veth pair with them."""
    for space in spaces:
        for pid in _pids(space):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", space], capture_output=True, timeout=30)


def _pids(space: str) -> list[int]:
    listed = subprocess.run(["ip", "netns", "pids", space], capture_output=True, text=True, timeout=30)
    return [int(pid) for pid in listed.stdout.split()]


def _start(nodes: Nodes, rank: int, results: Path, cache: Path, log: Path, **extra: object) -> subprocess.Popen:
    """`python -m submission run ... nodes=2 node_rank=RANK master_addr=10.77.0.1` in node
    RANK's namespace, its /etc/hosts bind-mounted over the host's; no *_SOCKET_IFNAME set."""
    env = child_env()
    for variable in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        env.pop(variable, None)
    settings = quick_settings(results, cache, **{
        "nodes": 2, "node_rank": rank, "master_addr": ADDRESSES[0], "runs": 1, "seeds": "21",
        "target_accuracy": 0.05, "cache_clear_cmd": "", "lost_node_seconds": LOST_AFTER_S, **extra})
    command = ["ip", "netns", "exec", nodes.namespaces[rank], "unshare", "-m", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', str(nodes.hosts),
               sys.executable, "-m", "submission", "run", *settings]
    with open(log, "w") as out:
        return subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)


def _campaign(nodes: Nodes, tmp_path: Path, cache: Path, name: str) -> tuple[subprocess.Popen, subprocess.Popen]:
    return tuple(_start(nodes, rank, tmp_path / f"{name}{rank}", cache, _log(tmp_path, name, rank))
                 for rank in (0, 1))   # type: ignore[return-value]


def _log(tmp_path: Path, name: str, rank: int) -> Path:
    return tmp_path / f"{name}{rank}.log"


def _both_end(pair: tuple[subprocess.Popen, subprocess.Popen], logs: tuple[Path, Path]) -> None:
    """Wait for both nodes (RUN_WAIT_S at most); once one has failed the other gets
    LOST_AFTER_S and a minute more. Both must end with 0."""
    deadline = time.monotonic() + RUN_WAIT_S
    while time.monotonic() < deadline and any(p.poll() is None for p in pair):
        if any(p.poll() not in (None, 0) for p in pair):
            deadline = min(deadline, time.monotonic() + LOST_AFTER_S + 60)
        time.sleep(1)
    for process in pair:
        if process.poll() is None:
            process.kill()
            process.wait()
    said = "\n".join(f"--- node {rank} (exit {p.returncode}):\n{log.read_text()[-6000:]}"
                     for rank, (p, log) in enumerate(zip(pair, logs)))
    assert [p.returncode for p in pair] == [0, 0], said


def test_refused_without_a_route_to_master_addr(nodes, tmp_path, cache_dir):
    """No interface reaches master_addr and the host's name resolves to 127.0.0.1: refused in one
    line that names the variable to set, before anything is written."""
    log = tmp_path / "refused.log"
    node = _start(nodes, 1, tmp_path / "refused", cache_dir, log, master_addr="10.78.0.1")
    assert node.wait(timeout=120) == 2, log.read_text()
    said = log.read_text()
    assert "no interface of this host reaches master_addr=10.78.0.1" in said, said
    assert "set GLOO_SOCKET_IFNAME to the interface the nodes share" in said, said
    assert not (tmp_path / "refused").exists()


def test_two_namespaces_meet_and_a_lost_node_ends_the_run(nodes, tmp_path, cache_dir):
    # 1. with no variable set by hand, the two nodes meet over their veth ends
    first = _campaign(nodes, tmp_path, cache_dir, "first")
    _both_end(first, (_log(tmp_path, "first", 0), _log(tmp_path, "first", 1)))
    for rank in (0, 1):
        said = _log(tmp_path, "first", rank).read_text()
        assert (f"nodes meet over {nodes.links[rank]} ({ADDRESSES[rank]}, the interface of the route to "
                f"master_addr={ADDRESSES[0]}): GLOO_SOCKET_IFNAME={nodes.links[rank]} for the runs") in said
    assert (tmp_path / "first0" / "2xlocal_cpu" / "resnet" / "result_0.txt").is_file()

    # 2. node 1 lost mid-run: no connection closes, node 0 ends within its bound
    second = _campaign(nodes, tmp_path, cache_dir, "second")
    folder = tmp_path / "second0" / "2xlocal_cpu"
    partial = folder / "resnet" / "result_0.txt.partial"
    def started() -> bool:
        return partial.is_file() and "run_start" in partial.read_text()
    wait_for(lambda: started() or any(p.poll() is not None for p in second), RUN_WAIT_S, "run_start on node 0")
    assert started(), _log(tmp_path, "second", 0).read_text() + _log(tmp_path, "second", 1).read_text()
    _ip("-n", nodes.namespaces[1], "link", "set", nodes.links[1], "down")
    for pid in _pids(nodes.namespaces[1]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    lost_at = time.monotonic()
    try:
        rc = second[0].wait(timeout=LOST_AFTER_S + 240)     # the test's own bound, were it to hang
    finally:
        second[1].wait(timeout=30)
    ended_after = time.monotonic() - lost_at
    said = _log(tmp_path, "second", 0).read_text()
    assert rc == 1, said
    # the bound: lost_node_seconds, a beat (5 s) and torchrun's and the campaign's own ends
    assert ended_after < LOST_AFTER_S + 60, (ended_after, said)
    assert "[node 0] node 1 lost: no heartbeat for" in said and f"(lost_node_seconds={LOST_AFTER_S})" in said
    assert "error: run 1 stopped: a node was lost (the line above names it); its partial log is" in said
    assert "run_start" in partial.read_text() and not (folder / "resnet" / "result_0.txt").exists()

    # 3. the same commands resume: the partial log set aside in attempts/, the run redone
    _ip("-n", nodes.namespaces[1], "link", "set", nodes.links[1], "up")
    resumed = _campaign(nodes, tmp_path, cache_dir, "second")
    _both_end(resumed, (_log(tmp_path, "second", 0), _log(tmp_path, "second", 1)))
    (kept,) = (folder / "attempts").glob("result_0-*.txt")
    assert "run_start" in kept.read_text()
    assert (folder / "resnet" / "result_0.txt").is_file()
    assert "node 1: campaign complete" in _log(tmp_path, "second", 1).read_text()
