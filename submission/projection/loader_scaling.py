"""The loader's rate per process at a number of threads, from what a profile measured, and the
one line that says what more threads would buy where the loader limits a run.

Up to the largest count measured, the rate follows the profile's thread sweep (`loader_sweep`,
linear between the counts measured, through zero below the fewest). Beyond it nothing was
measured: each further thread adds `beyond` of that count's rate per thread, 0 (flat) where
the profile swept its threads up to its host's CPUs, 1 (linear) where it measured one count
only (a profile without a sweep, before 2026-11-28): an assumption either way, printed, which
`project beyond_measured_threads=F` states otherwise.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..bench_profile import BenchProfile

# beyond the largest count measured, without a stated factor: a sweep (which went up to its
# host's CPUs) is taken as flat; one count measured (no sweep) as linear, as before the sweep
FLAT, LINEAR = 0.0, 1.0


@dataclass(frozen=True)
class ThreadCurve:
    """img/s per process at each thread count measured, and what is assumed beyond them."""
    rates: dict[int, float]
    swept: bool                   # from the profile's sweep, not its one loader row
    beyond: float                 # each thread beyond the largest count: this share of its rate per thread
    stated: bool                  # `beyond` given by the user, not the default
    host: str                     # where it was measured: "16 CPUs", or the loader row's threads

    @property
    def largest(self) -> int:
        return max(self.rates)

    def at(self, threads: int) -> float:
        """img/s per process at `threads`."""
        counts = sorted(self.rates)
        if threads in self.rates:
            return self.rates[threads]
        if threads < counts[0]:
            return self.rates[counts[0]] * threads / counts[0]
        top = counts[-1]
        if threads > top:
            return self.rates[top] * (1 + self.beyond * (threads - top) / top)
        low = max(c for c in counts if c < threads)
        high = min(c for c in counts if c > threads)
        return self.rates[low] + (self.rates[high] - self.rates[low]) * (threads - low) / (high - low)

    def words(self, threads: int) -> str:
        """How the rate at `threads` was had, for the assumptions."""
        measured = ", ".join(f"{count}: {rate:,.0f}" for count, rate in sorted(self.rates.items()))
        how = (f"the profile's thread sweep ({measured} img/s at each count, on {self.host})" if self.swept else
               f"the profile's loader row ({measured} img/s; no thread sweep in the profile)")
        if threads <= self.largest:
            return f"{self.at(threads):,.0f} img/s a process along {how}"
        share = (f"{self.beyond:g} of its rate per thread" if self.beyond not in (FLAT, LINEAR) else
                 "nothing (flat)" if self.beyond == FLAT else "as much as each measured one did (linear)")
        whose = ("stated: beyond_measured_threads" if self.stated else
                 "assumed, not measured: a sweep stops at its host's CPUs" if self.swept else
                 "assumed, not measured: the profile has no sweep; `bench json=FILE` records one")
        return (f"{self.at(threads):,.0f} img/s a process along {how}; each thread beyond its "
                f"{self.largest} adds {share} ({whose}; beyond_measured_threads=F states another share)")


def thread_curve(source: BenchProfile, beyond: float | None) -> ThreadCurve:
    """The curve of the loader figures' profile: its sweep where it swept the same loader, else
    its loader row as a sweep of one count."""
    sweep = source.loader_sweep
    if sweep is not None and sweep.kind == source.loader.kind and sweep.img_per_s:
        default = FLAT
        rates, host, swept = sweep.img_per_s, f"{sweep.cpus} CPUs", True
    else:
        default = LINEAR
        rates, host, swept = {source.loader.threads: source.loader.img_per_s}, "", False
    return ThreadCurve(rates, swept, default if beyond is None else beyond, beyond is not None, host)


def lift_line(threads: int, most: int, processes: int, curve: ThreadCurve, limited_rates: list[float],
              minutes_at: Callable[[int], float]) -> str:
    """Where the loader limits training parts (their step rates, whole system, in
    `limited_rates`): the fewest threads per process up to `most` (the host's share of a
    process) that would lift every one and the minutes a run would take then; or that no count
    the host has would, and what its most would give."""
    need = max(limited_rates) / processes
    lifting = next((t for t in range(threads + 1, most + 1) if curve.at(t) >= need), None)
    parts = f"{len(limited_rates)} training part(s)"
    if lifting is not None:
        return (f"the loader limits {parts} at {threads} threads per process; {lifting} would lift every "
                f"one ({curve.at(lifting):,.0f} img/s a process against the step's {need:,.0f} at its "
                f"fastest loader-limited side): {minutes_at(lifting):.3f} min a run with "
                f"workers_per_device={lifting}")
    best = max(range(threads, max(threads, most) + 1), key=curve.at)
    gain = (f"; at {best} ({curve.at(best):,.0f} img/s a process) a run would take "
            f"{minutes_at(best):.3f} min" if best > threads and curve.at(best) > curve.at(threads) else "")
    return (f"the loader limits {parts} at {threads} threads per process, and no thread count this "
            f"host has ({most} a process at most) would lift every one: the step needs {need:,.0f} img/s "
            f"a process at its fastest loader-limited side{gain}")
