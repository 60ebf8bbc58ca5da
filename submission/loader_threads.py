"""How many loader threads a process gets: the one rule that preflight (and with it the
campaign, a tradeoff and the bench) and `project` apply, each with its own CPU count (this
process's usable CPUs, or a descriptor's vCPUs).

workers_per_device is unset (0) unless given. Unset, it is derived:
  - on a GPU: what the host gives the process (its CPUs divided among the node's processes)
    less STEP_THREAD_CPUS for the step's own thread, which launches the device's work and
    needs one CPU (docs/throughput.md, "Loader threads on a GPU");
  - on a CPU: CPU_DEFAULT, lowered to the CPUs each process has (the step computes on the
    same cores as the loader, and takes them all: today's rule since the harness began).
Given (the command line, a descriptor, a grid), it is kept where the node's processes fit on
the CPUs; where they do not, a harness preset's value (submission/embedded.yaml) is lowered to
what fits, and anyone else's is refused with the value that fits.
"""
from __future__ import annotations

from dataclasses import dataclass

# the CPUs the step's own thread needs on a GPU: one Python thread queues every kernel, so at
# most one CPU; docs/throughput.md gives the records that show it takes it
STEP_THREAD_CPUS = 1
# on a CPU: the default before it is lowered to the CPUs each process has
CPU_DEFAULT = 8


@dataclass(frozen=True)
class LoaderThreads:
    """The loader threads per process to run with, and where the count comes from."""
    threads: int
    origin: str            # the setting's origin where kept as given, "derived: ..." where computed
    note: str = ""         # said before launching: a preset's value lowered to fit
    problem: str = ""      # a given value that does not fit: refuse with this (threads: what fits)

    @property
    def derived(self) -> bool:
        return self.origin.startswith("derived")


def loader_threads(given: int, given_origin: str, preset: bool, device_type: str,
                   cpus: int, cpus_words: str, processes: int) -> LoaderThreads:
    """The rule. given: workers_per_device (0: unset) from `given_origin`, a harness preset
    where `preset`; cpus: what the host gives this node's processes, `cpus_words` saying it
    ("16 usable CPUs", "192 vCPUs (systems/p5en.json)"); processes: of the node."""
    share = max(1, cpus // processes)     # below one each the processes share CPUs anyway
    each = f"{cpus_words} / {processes} process(es)"
    if not given:
        if device_type == "cuda":
            return LoaderThreads(max(1, share - STEP_THREAD_CPUS),
                                 f"derived: {each} - {STEP_THREAD_CPUS} for the step's thread")
        return LoaderThreads(min(CPU_DEFAULT, share), f"derived: min({CPU_DEFAULT}, {each})")
    if given * processes <= cpus or given <= share:
        return LoaderThreads(given, given_origin)
    if preset:
        return LoaderThreads(share, f"derived: {each}",
                             note=f"workers_per_device={share}: {each} (was {given}, {given_origin})")
    return LoaderThreads(share, given_origin, problem=(
        f"workers_per_device={given} ({given_origin}) x {processes} process(es) per node is "
        f"{given * processes} loader threads, but this process may run on {cpus} CPUs; pass "
        f"workers_per_device={share}."))
