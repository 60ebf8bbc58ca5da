"""A one-line progress meter on stderr for the long steps of data preparation."""
from __future__ import annotations

import sys
import time


class ProgressMeter:
    """done/total, rate and ETA on one line of stderr, redrawn at most every 2 s."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.count = label, total, 0
        self.start = self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if now - self.last >= 2 or self.count == self.total:
            self.last = now
            rate = self.count / max(now - self.start, 1e-9)
            eta = (self.total - self.count) / rate if rate else 0
            print(f"\r{self.label}: {self.count}/{self.total} ({rate:.0f}/s, ETA {eta:.0f}s)",
                  end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        print(f"\r{self.label}: {self.count}/{self.total} in {time.monotonic() - self.start:.1f}s",
              file=sys.stderr, flush=True)
