"""Throughput figures of one process, measured side by side on the run's own recipe step.

    python -m submission bench [system=...] [key=value ...] [steps=N] [rounds=R] [json=FILE]
    python -m submission bench sweep=loader [system=...] data_dir=FOLDER [key=value ...]
    python -m submission bench compare=composer [system=...] [key=value ...] [steps=N]
    python -m submission bench compare=methods [system=...] [key=value ...] [steps=N] [rounds=R]

  timing.py            the primitives: seconds per call, steps in turns, the loader alone
  rows.py              how a row is printed: at once, an img/s row beside the recipe step's
  measure.py           the main bench: its rows in order, each returning its part of the
                       profile (`json=FILE`) that `python -m submission project` reads
  loader_setup_rows.py   the run's loaders in a fresh process, without and with the warm-up
  step_rows.py           the recipe step, the plain loop, each side, the loop's work, MFU
  compiled_rows.py       the compiled step (compile=true) and its side changes
  power_rows.py          the energy counters around the step
  loader_rows.py         each loader alone, feeding the step, through evaluation
  augmentation_rows.py   the torchvision loader's CPU work per image
  thread_rows.py         the train loader alone by its thread count (and in sweep=loader)
  sweep.py             sweep=loader: the loader on each .beton write option
  compare_composer.py  compare=composer: MosaicML Composer's Trainer with the Mild methods
  compare_methods.py   compare=methods: each method swapped for the plain loop's
  command.py           the options above, workers_per_device fitted to this machine's CPUs
                       (derived where unset: loader_threads.py)
"""
from __future__ import annotations

from .command import main

__all__ = ["main"]
