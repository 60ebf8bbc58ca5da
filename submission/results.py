"""The results folder: its two records (the campaign's and the summary, each one type written
and read here), the error every reader of it raises, and where a configuration's campaign
lies (its files by name: submission.run_folder).

    <results_dir>/<system_name>/
      campaign.json                 CampaignRecord: seeds, the settings the campaign started with
      summary.md, summary.json      Summary: per-run figures and the score

The campaign writes here; score, report and package read it. This module sits below
all of them and imports none of them, so that they share it without importing one
another.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config, in_repository
from .jsonfile import record_from_dict, write_json
from .run_folder import CampaignFolder, ResultsRoot

# the round of the Mosaic entry: its parser reads the logs (the file format is the same in
# every round) and its vocabulary the system files of a package
RULESET = "2.0.0"


class CampaignError(RuntimeError):
    """A campaign cannot go on, or its record cannot be read; the message says what
    happened and what to do."""


def read_json(path: Path) -> dict:
    """A campaign record written by jsonfile.write_json; a damaged one is a CampaignError
    naming the place, never read as missing."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CampaignError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            "It is the campaign's record (seeds, settings): restore it from a backup, or move "
            "the folder aside to start a new campaign; result files are never edited.") from None


def results_root(config: Config) -> ResultsRoot:
    """results_dir, relative to the repository unless absolute."""
    return ResultsRoot(in_repository(config.results_dir))


def campaign_folder(config: Config) -> CampaignFolder:
    """results/<system_name>/: the configuration's campaign."""
    return results_root(config).campaign(config.system_name)


# ---- the campaign's record ---------------------------------------------------------
@dataclass
class CampaignRecord:
    """campaign.json: what a campaign was started with, read when it resumes and by whatever
    is made of its results (score's price, the report's target, a package's configs)."""
    system: str                     # the descriptor's name (p4d, local)
    system_name: str
    seeds: list[int]
    config: dict[str, Any]          # Config.to_dict() of the campaign's configuration
    created: str

    @property
    def settings(self) -> dict[str, Any]:
        return self.config.get("settings") or {}

    @property
    def price_usd_per_hour(self) -> float:
        try:
            return float(self.settings.get("price_usd_per_hour") or 0.0)
        except (TypeError, ValueError):
            return 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def read_campaign(folder: Path) -> CampaignRecord | None:
    """folder/campaign.json, or None when there is none (foreign logs); a damaged one is a
    CampaignError naming it, never read as missing: its price and target count."""
    path = CampaignFolder(Path(folder)).record
    if not path.is_file():
        return None
    data = read_json(path)
    names = [f.name for f in dataclasses.fields(CampaignRecord)]
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise CampaignError(f"{path} is not a campaign record (an object with {', '.join(names)}); "
                            "restore it from a backup, or move the folder aside")
    return CampaignRecord(str(data.get("system") or ""), str(data.get("system_name") or Path(folder).name),
                          list(data.get("seeds") or []), dict(data.get("config") or {}),
                          str(data.get("created") or ""))


def write_campaign(folder: Path, record: CampaignRecord) -> None:
    write_json(CampaignFolder(Path(folder)).record, record.to_dict())


# ---- the summary -------------------------------------------------------------------
@dataclass
class RunResult:
    file: str                       # result_0.txt
    seed: int | None
    status: str                     # success | aborted | incomplete
    epochs: float | None            # run_stop epoch_num, else the last epoch_num seen
    accuracy: float | None          # last eval_accuracy (top-1 fraction)
    minutes: float | None           # (run_stop - run_start) / 60000
    train_samples: int | None
    img_per_s: float | None         # train_samples * epochs / seconds (eval included)
    cost_usd: float | None          # minutes / 60 * price per hour; None without a price
    reason: str = ""                # run_stop `reason`, or why the run cannot be scored
    unreadable_lines: int = 0       # lines the MLPerf parser could not read
    rejected: str = ""              # why the official summarizer drops it ("" when it scores it)
    energy_j: float | None = None   # run_start to run_stop, all ranks (progress/run_<i>.jsonl)
    energy_note: str = ""           # what counted it, or why it was not measured

    @property
    def converged(self) -> bool:
        return (self.status == "success" and self.minutes is not None and not self.unreadable_lines
                and not self.rejected)


@dataclass
class Summary:
    """summary.json: one system's runs and score, as submission.score computes them."""
    system_name: str
    runs: list[RunResult]
    score_minutes: float | None     # MLPerf olympic mean; None when it cannot be computed
    valid: bool                     # a valid MLPerf ResNet score
    reasons: list[str] = field(default_factory=list)   # why not valid, in plain words
    cost_per_run_usd: float | None = None               # mean over runs with a time
    price_usd_per_hour: float = 0.0
    dropped: int = 0                # runs counted as non-converged
    scaling_factor: float = 1.0     # resnet/scaling.json, multiplied into the score
    img_per_s_definition: str = ""  # what a run's img/s counts, in words
    score_rule: str = ""            # how the score is computed, in words

    @property
    def campaign_kwh(self) -> float | None:
        """The runs' energy added up, in kWh; None unless every run's was measured."""
        joules = [r.energy_j for r in self.runs if r.energy_j is not None]
        return sum(joules) / 3.6e6 if joules and len(joules) == len(self.runs) else None

    @property
    def energy_note(self) -> str:
        """What counted the energy, or why it was not measured (each distinct note once)."""
        return "; ".join(dict.fromkeys(r.energy_note for r in self.runs if r.energy_note))

    @property
    def mean_img_per_s(self) -> float | None:
        values = [r.img_per_s for r in self.runs if r.img_per_s is not None]
        return statistics.fmean(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        """The record, with the figures computed from the runs beside them (for readers of the
        file without this module)."""
        return {**dataclasses.asdict(self), "mean_img_per_s": self.mean_img_per_s,
                "campaign_kwh": self.campaign_kwh, "energy_note": self.energy_note}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        return record_from_dict(cls, {"runs": [], **data})


def write_summary(folder: Path, summary: Summary, markdown: str) -> tuple[Path, Path]:
    """folder/summary.md (`markdown`, for people) and folder/summary.json (the record)."""
    files = CampaignFolder(Path(folder))
    md, js = files.summary_text, files.summary_record
    md.write_text(markdown)
    write_json(js, summary.to_dict())
    return md, js


def read_summary(folder: Path) -> Summary | None:
    """folder/summary.json, or None when there is none; a damaged one is a CampaignError."""
    path = CampaignFolder(Path(folder)).summary_record
    if not path.is_file():
        return None
    redo = f"`python -m submission score {folder}` writes it again from the result files"
    try:
        return Summary.from_dict(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise CampaignError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); {redo}") from None
    except (TypeError, AttributeError) as exc:
        raise CampaignError(f"{path} is not a summary record ({exc}); {redo}") from None
