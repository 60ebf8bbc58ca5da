"""The bench's command line: its options, the configuration fitted to this machine as a
campaign fits it, and which measurement runs."""
from __future__ import annotations

import sys

from ..config import Config, ConfigError, parse_overrides
from ..options import BenchOptions
from ..preflight import loader_workers, precision_problems, resolve_here
from .rows import say


def fitted(config: Config) -> Config:
    """The configuration with workers_per_device fitted to the CPUs this process may use,
    as a campaign fits it (preflight.loader_workers): derived where unset, a preset's lowered
    (and said), a user's that does not fit refused."""
    problems = precision_problems(config)
    if problems:
        raise ConfigError("; ".join(problems))
    decision = loader_workers(config)
    if decision.problem:
        raise ConfigError(decision.problem)
    if decision.threads == config.workers_per_device:
        return config
    if decision.note:
        print(f"[bench] {decision.note}", flush=True)
    return config.replaced({"workers_per_device": decision.threads}, decision.origin)


def main(options: BenchOptions, settings: list[str]) -> int:
    try:
        out, sweep_name, compare = options.json, options.sweep, options.compare
        steps, rounds, quick = options.steps, options.rounds, options.quick
        if quick and (sweep_name or compare):
            raise ConfigError("quick=true is a form of the main bench; sweep= and compare= are other benches")
        if out and (sweep_name or compare):
            raise ConfigError(f"json={out} writes the main bench's profile; sweep= and compare= "
                              "only print their table")
        overrides = parse_overrides(settings)
        # torch, FFCV and the measurements are imported once the words are known good: a
        # mistyped option is answered in a fraction of a second, not after seconds of imports
        from ..bench_profile import write as write_profile
        from ..data.prepare import prepare
        from ..inventory import usable_cpus
        from . import compare_composer, compare_methods, measure, sweep
        from .thread_rows import loader_thread_sweep, thread_counts
        from .timing import bench_device
        if sweep_name:
            overrides.setdefault("train_limit", str(sweep.SWEEP_TRAIN_LIMIT))
        config = fitted(resolve_here(None, overrides))
        if compare == "composer":
            compare_composer.require_composer()
        device = bench_device(config)
        counts = thread_counts(usable_cpus(), options.sweep_threads if options.sweep_threads is not None
                               else (0 if quick else None))
        if sweep_name:
            sweep.loader_sweep(config, device, steps, say=say)
            if counts:
                loader_thread_sweep(config, prepare(config).train_path, usable_cpus(), counts, device, steps)
        elif compare == "composer":
            say(compare_composer.header(config, steps))
            compare_composer.comparison(config, prepare(config).num_classes, steps, say=say)
        elif compare == "methods":
            say(compare_methods.header(config, steps, rounds))
            figures = compare_methods.comparison(config, prepare(config).num_classes, steps, rounds)
            say(compare_methods.table(figures))
        else:
            profile = measure.measure(config, device, steps, rounds, quick, counts)
            if out:
                write_profile(profile, out)
                say(f"\nprofile written to {out} (python -m submission project ... profile={out})")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
