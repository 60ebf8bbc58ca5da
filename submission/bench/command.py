"""The bench's command line: its options, the configuration fitted to this machine as a
campaign fits it, and which measurement runs."""
from __future__ import annotations

import sys

from ..config import ConfigError, parse_overrides, resolve
from ..data.prepare import prepare
from ..preflight import loader_workers, precision_problems
from ..profile import write as write_profile
from . import compare_composer, compare_methods, measure, sweep
from .timing import bench_device

COMPARISONS = {"composer": "MosaicML Composer's Trainer with the Mild methods",
               "methods": "the recipe's step with each method swapped for the plain loop's"}
OPTIONS = {"steps": "10", "rounds": "3", "json": "", "sweep": "", "compare": "", "quick": "false"}


def _whole_number(key: str, value: str, example: str) -> int:
    if not (value.isdigit() and int(value) > 0):
        raise ConfigError(f"{key}={value}: give a whole number above 0, e.g. {example}")
    return int(value)


def split_options(words: list[str]) -> tuple[dict, list[str]]:
    """The bench's own options, and the settings words left for the configuration."""
    options, settings = dict(OPTIONS), []
    for word in words:
        key, sep, value = word.partition("=")
        if key not in options:
            settings.append(word)
        elif not sep:
            raise ConfigError(f"{key} takes a value ({key}=...): the bench's options are steps=N, "
                              "rounds=N, json=FILE, quick=true, sweep=loader, compare=" + "|".join(COMPARISONS))
        else:
            options[key] = value
    return options, settings


def fitted(config):
    """The configuration with workers_per_device fitted to the CPUs this process may use,
    as a campaign fits it (preflight.loader_workers): lowered and said where the harness
    chose it, refused where the user did."""
    problems = precision_problems(config)
    if problems:
        raise ConfigError("; ".join(problems))
    decision = loader_workers(config)
    if decision.problem:
        raise ConfigError(decision.problem)
    if decision.workers == config.workers_per_device:
        return config
    if decision.note:
        print(f"[bench] {decision.note}", flush=True)
    return config.replaced({"workers_per_device": decision.workers}, decision.origin)


def main(argv=None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        options, settings = split_options(words)
        out, sweep_name, compare = options["json"], options["sweep"], options["compare"]
        steps = _whole_number("steps", options["steps"], "steps=10 (timed steps)")
        rounds = _whole_number("rounds", options["rounds"], "rounds=3 (turns of the steps timed side by side)")
        if options["quick"] not in ("true", "false"):
            raise ConfigError(f"quick={options['quick']}: give quick=true (the figures a profile needs, "
                              "as qualify measures them) or quick=false")
        quick = options["quick"] == "true"
        if quick and (sweep_name or compare):
            raise ConfigError("quick=true is a form of the main bench; sweep= and compare= are other benches")
        if sweep_name and sweep_name != "loader":
            raise ConfigError(f"sweep={sweep_name}: the bench knows sweep=loader (the .beton write options)")
        if compare and compare not in COMPARISONS:
            raise ConfigError(f"compare={compare}: the bench knows "
                              + "; ".join(f"compare={k} ({v})" for k, v in COMPARISONS.items()))
        if out and (sweep_name or compare):
            raise ConfigError(f"json={out} writes the main bench's profile; sweep= and compare= "
                              "only print their table")
        overrides = parse_overrides(settings)
        if sweep_name:
            overrides.setdefault("train_limit", str(sweep.SWEEP_TRAIN_LIMIT))
        config = fitted(resolve(None, overrides))
        if compare == "composer":
            compare_composer.require_composer()
        device = bench_device(config)
        if sweep_name:
            sweep.loader_sweep(config, device, steps, say=measure.say)
        elif compare == "composer":
            measure.say(compare_composer.header(config, steps))
            compare_composer.comparison(config, prepare(config).num_classes, steps, say=measure.say)
        elif compare == "methods":
            measure.say(compare_methods.header(config, steps, rounds))
            figures = compare_methods.comparison(config, prepare(config).num_classes, steps, rounds)
            measure.say(compare_methods.table(figures))
        else:
            figures = measure.measure(config, device, steps, rounds, quick)
            if out:
                write_profile(measure.profile(config, figures, steps, rounds), out)
                measure.say(f"\nprofile written to {out} (python -m submission project ... profile={out})")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
