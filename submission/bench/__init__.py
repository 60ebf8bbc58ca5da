"""Throughput figures of one process, measured side by side on the run's own recipe step.

    python -m submission bench [system=...] [key=value ...] [steps=N] [rounds=R] [json=FILE]
    python -m submission bench sweep=loader [system=...] data_dir=FOLDER [key=value ...]
    python -m submission bench compare=composer [system=...] [key=value ...] [steps=N]
    python -m submission bench compare=methods [system=...] [key=value ...] [steps=N] [rounds=R]

  timing.py            the primitives: seconds per call, steps in turns, the loader alone
  measure.py           the main bench: every row, printed as measured; the profile JSON
                       (`json=FILE`) that `python -m submission project` reads
  sweep.py             sweep=loader: the loader on each .beton write option
  compare_composer.py  compare=composer: MosaicML Composer's Trainer with the Mild methods
  compare_methods.py   compare=methods: each method swapped for the plain loop's
  command.py           the options above, workers_per_device fitted to this machine's CPUs
"""
from __future__ import annotations

from .command import main

__all__ = ["main"]
