"""A projection as numbers: the parts of one run, their sum, and what the text says of them."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..costs import usd
from ..published import ClosedRecord

# what a part of a run is
TRAINING, EVALUATION, SET_UP, EPOCH_STARTS = "training", "evaluation", "set-up", "epoch starts"


@dataclass(frozen=True)
class Part:
    kind: str                 # TRAINING, EVALUATION, SET_UP or EPOCH_STARTS
    what: str
    images: int
    img_per_s: float          # whole system
    limited_by: str
    seconds: float
    side: int | None = None   # a training part's image side (px)


def minutes(parts: list[Part]) -> float:
    return sum(p.seconds for p in parts) / 60


@dataclass
class Projection:
    system: str
    recipe: str
    processes: int
    parts: list[Part]
    runs: int
    price_usd_per_hour: float
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # (epoch, minutes) of a run that reaches the target at the last evaluation before the
    # end of its budget; None when that evaluation is the budget's last step
    early_stop: tuple[float, float] | None = None
    # where the loader limits the run (a torchvision loader, or figures from loader_profile=)
    loader_summary: list[str] = field(default_factory=list)
    # the profile's measured power per process while training; None: not measured (energy_note)
    watts_per_process: float | None = None
    energy_note: str = ""
    # MLPerf closed-division records on the system's GPUs: another recipe, shown beside
    closed_records: list[ClosedRecord] = field(default_factory=list)
    # where the loader limits training parts: the thread count that would lift them (and the
    # minutes then), or that none the host has would ("": the loader limits none)
    loader_lift: str = ""

    def of_kind(self, kind: str) -> list[Part]:
        return [p for p in self.parts if p.kind == kind]

    @property
    def run_minutes(self) -> float:
        return minutes(self.parts)

    @property
    def training_minutes(self) -> float:
        return minutes(self.of_kind(TRAINING))

    @property
    def evaluation_minutes(self) -> float:
        return minutes(self.of_kind(EVALUATION))

    @property
    def training_img_per_s(self) -> float:
        """The whole system's training rate over every side of the run (what the
        write-ups' throughput figures measure)."""
        training = self.of_kind(TRAINING)
        return sum(p.images for p in training) / sum(p.seconds for p in training)

    @property
    def campaign_minutes(self) -> float:
        return self.run_minutes * self.runs

    @property
    def run_cost_usd(self) -> float | None:
        return usd(self.run_minutes, self.price_usd_per_hour)

    @property
    def run_kwh(self) -> float | None:
        """Energy of a run at the profile's measured training power, every part of the run at it."""
        if self.watts_per_process is None:
            return None
        return self.watts_per_process * self.processes * self.run_minutes * 60 / 3.6e6

    @property
    def campaign_kwh(self) -> float | None:
        kwh = self.run_kwh
        return None if kwh is None else kwh * self.runs

    @property
    def campaign_cost_usd(self) -> float | None:
        cost = self.run_cost_usd
        return None if cost is None else cost * self.runs
