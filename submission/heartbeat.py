"""Each node's heartbeat in a run of several nodes: a node lost ends its peers' run in bounded time.

A node that vanishes (power, a kernel panic, its network cut) closes no connection: its peers
would wait in their next collective for the collective timeout (distributed.COLLECTIVE_TIMEOUT,
10 minutes, which must also let a slow but living peer finish a first compilation). So in every
run of several nodes, each process adds to its node's count in torchrun's rendezvous store (the
TCPStore that node 0's agent serves on master_addr:master_port, reached through a client of its
own whose operations time out in seconds) and reads the other nodes' counts. A node whose count
has not moved for lost_node_seconds, or the store itself when node 0 is the one lost, ends every
process of this node at once, whatever its main thread waits in (torchrun would give a worker
blocked in a collective 30 s before its SIGKILL), local rank 0 saying in one line which node;
their exit status, NODE_LOST_EXIT, tells the launcher and the campaign. The partial log is kept as it is (no
run_stop: the main thread may be inside the logger), and the next start sets it aside.
A node that ends its run marks itself done, so that its peers still finishing do not take it
for lost. A process killed on a node that stays up closes its connections: its peers'
collectives fail at once ("Connection closed by peer [address]"), before any beat is missed.
"""
from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:                # the launcher and the campaign read NODE_LOST_EXIT without torch
    import torch.distributed as dist

NODE_LOST_EXIT = 75       # sysexits' EX_TEMPFAIL: the same command resumes
KEY = "submission/heartbeat/node{}"
BEAT_EVERY_S = 5.0        # at most; a quarter of the bound below 20 s


def beat_every_s(lost_after_s: float) -> float:
    """Seconds between two beats: four beats, at least, before a node counts as lost."""
    return min(BEAT_EVERY_S, lost_after_s / 4)


class Heartbeat(threading.Thread):
    """This node's beat and its watch over the others' (a daemon thread, started at once)."""

    def __init__(self, store: dist.Store, node: int, nodes: int, lost_after_s: float, where: str,
                 speaks: bool):
        super().__init__(daemon=True, name="heartbeat")
        self.store, self.node, self.lost_after_s, self.where = store, node, lost_after_s, where
        self.speaks = speaks         # the process that says which node was lost (local rank 0)
        self.every_s = beat_every_s(lost_after_s)
        now = time.monotonic()
        # each other node: its last count and when it last moved (this host's clock only)
        self.seen = {peer: (0, now) for peer in range(nodes) if peer != node}
        self.done: set[int] = set()
        self.answered = now          # when the store last answered
        self.stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            self.beat()
            lost = self.lost()
            if lost and not self.stopped.is_set():
                if self.speaks:
                    print(f"[node {self.node}] {lost}; node {self.node} stops its part of the run "
                          "(its partial log is kept): re-run the same command on every node to resume",
                          file=sys.stderr, flush=True)
                os._exit(NODE_LOST_EXIT)

    def beat(self) -> None:
        """Add one to this node's count, and read the others' (add 0: a read that does not wait
        for a key no one has written yet)."""
        try:
            self.store.add(KEY.format(self.node), 1)
            for peer, (count, since) in self.seen.items():
                if peer in self.done:
                    continue
                if self.store.add(KEY.format(peer) + "/done", 0):
                    self.done.add(peer)
                now_count = self.store.add(KEY.format(peer), 0)
                self.seen[peer] = (now_count, time.monotonic() if now_count != count else since)
        except (RuntimeError, OSError):     # torch's DistError is a RuntimeError; timed out
            return
        self.answered = time.monotonic()

    def lost(self) -> str:
        """What is lost, in words ("" while every node beats)."""
        now = time.monotonic()
        if self.node != 0 and now - self.answered >= self.lost_after_s:
            return (f"node 0 lost: its rendezvous store at {self.where} has not answered for "
                    f"{now - self.answered:.0f} s (lost_node_seconds={self.lost_after_s:g})")
        silent = [peer for peer, (_, since) in self.seen.items()
                  if peer not in self.done and now - since >= self.lost_after_s]
        if not silent:
            return ""
        nodes = ", ".join(str(peer) for peer in silent)
        return (f"node {nodes} lost: no heartbeat for {now - self.seen[silent[0]][1]:.0f} s "
                f"(lost_node_seconds={self.lost_after_s:g})")

    def finish(self) -> None:
        """This node's run has ended: stop beating, and tell the others it is done."""
        self.stopped.set()
        try:
            self.store.add(KEY.format(self.node) + "/done", 1)
        except (RuntimeError, OSError):
            pass        # the store is gone with node 0's agent: no one is left to wait


def start(lost_after_s: float) -> Heartbeat | None:
    """This process's heartbeat in a torchrun job of several nodes (torchrun's GROUP_RANK,
    GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); None in a job of one node."""
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", 1))
    if nodes == 1:
        return None
    import torch.distributed as dist

    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    store = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=max(beat_every_s(lost_after_s), 2.0)))
    return Heartbeat(store, int(os.environ["GROUP_RANK"]), nodes, lost_after_s, f"{host}:{port}",
                     speaks=int(os.environ.get("LOCAL_RANK", 0)) == 0)
