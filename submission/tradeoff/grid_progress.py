"""How far a grid is on this machine: after each point, the points done of all, the minutes so
far, and the minutes left, estimated from the points that ran here in this command."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from .grid import GridPoint


class GridProgress:
    def __init__(self, points: list[GridPoint], clock: Callable[[], float] = time.monotonic) -> None:
        self.points, self.clock = points, clock
        self.began = clock()
        self.done: list[GridPoint] = []
        self.took: dict[int, float] = {}     # index -> minutes of a point that ran here

    def finished(self, point: GridPoint, minutes: float | None) -> None:
        """`point` is done: it ran for `minutes`, or was finished already (None)."""
        self.done.append(point)
        if minutes is not None:
            self.took[point.index] = minutes

    def estimate(self, point: GridPoint) -> float | None:
        """Minutes `point` will take: the mean of its configuration and budget where some of its
        seeds ran here, else its configuration's minutes per unit of budget, else every point's;
        None before any point ran."""
        ran = [(p, self.took[p.index]) for p in self.points if p.index in self.took]
        if not ran:
            return None
        same = [m for p, m in ran if (p.configuration, p.budget) == (point.configuration, point.budget)]
        if same:
            return statistics.fmean(same)
        own = [m / p.budget for p, m in ran if p.configuration == point.configuration]
        return statistics.fmean(own or [m / p.budget for p, m in ran]) * point.budget

    def line(self) -> str:
        left = [p for p in self.points if p not in self.done]
        so_far = (self.clock() - self.began) / 60
        estimates = [self.estimate(p) for p in left]
        if not left:
            rest = "none left"
        elif None in estimates:
            rest = "minutes left: known once a point has run here"
        else:
            known = [estimate for estimate in estimates if estimate is not None]
            rest = (f"about {sum(known):.1f} min left (from the {len(self.took)} point(s) that ran "
                    "here: same configuration and budget, else minutes per unit of budget)")
        return (f"[tradeoff] point {len(self.done)} of {len(self.points)} done: {so_far:.1f} min so far, "
                f"{rest}")
