"""The results folder: where a campaign's files lie, its two records (the campaign's and the
summary, each one type written and read here), and the error every reader of it raises.

    <results_dir>/<system_name>/
      campaign.json                 CampaignRecord: seeds, the settings the campaign started with
      config.json, data.json, system.json   (written with jsonfile.write_json)
      resnet/result_<i>.txt         complete runs only (an MLPerf benchmark folder)
      summary.md, summary.json      Summary: per-run figures and the score
      progress/run_<i>.log          a run's printed output, for people
      progress/run_<i>.jsonl        rank 0's progress records, as data
      tensorboard/run_<i>/          a run's TensorBoard events (tracker=tensorboard)
      wandb/                        W&B's own files of the runs (tracker=wandb)

The campaign writes here; score, report and package read it. This module sits below
all of them and imports none of them, so that they share it without importing one
another.
"""
from __future__ import annotations

import dataclasses
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config, in_repository
from .jsonfile import record_from_dict, write_json
from .tracking import Target

BENCHMARK = "resnet"          # the MLPerf benchmark folder of result files
# the round of the Mosaic entry: its parser reads the logs (the file format is the same in
# every round) and its vocabulary the system files of a package
RULESET = "2.0.0"
CAMPAIGN_RECORD, SUMMARY_RECORD, SUMMARY_TEXT = "campaign.json", "summary.json", "summary.md"
_RESULT_NAME = re.compile(r"^result_(\d+)\.txt$")


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


def results_root(config: Config) -> Path:
    """results_dir, relative to the repository unless absolute."""
    return in_repository(config.results_dir)


def system_dir(config: Config) -> Path:
    """results/<system_name>/: one campaign's folder."""
    return results_root(config) / config.system_name


def result_name(index: int) -> str:
    return f"result_{index}.txt"


def result_index(path: Path | str) -> str | None:
    """The run index in a result file's name ("3" of result_3.txt), None for another name."""
    found = _RESULT_NAME.match(Path(path).name)
    return found.group(1) if found else None


def result_path(config: Config, index: int) -> Path:
    """The MLPerf result file of run `index` (0-based), present once the run is complete."""
    return system_dir(config) / BENCHMARK / result_name(index)


def result_files(folder: Path) -> list[Path]:
    """folder/resnet/result_<i>.txt, in run order (result_10 after result_9)."""
    benchmark = Path(folder) / BENCHMARK
    if not benchmark.is_dir():
        return []
    found = [(int(index), p) for p in benchmark.iterdir()
             if p.is_file() and (index := result_index(p)) is not None]
    return [p for _, p in sorted(found)]


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
    path = Path(folder) / CAMPAIGN_RECORD
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
    write_json(Path(folder) / CAMPAIGN_RECORD, record.to_dict())


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
        joules = [r.energy_j for r in self.runs]
        return sum(joules) / 3.6e6 if joules and None not in joules else None

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
    def from_dict(cls, data: dict[str, Any]) -> "Summary":
        return record_from_dict(cls, {"runs": [], **data})


def write_summary(folder: Path, summary: Summary, markdown: str) -> tuple[Path, Path]:
    """folder/summary.md (`markdown`, for people) and folder/summary.json (the record)."""
    md, js = Path(folder) / SUMMARY_TEXT, Path(folder) / SUMMARY_RECORD
    md.write_text(markdown)
    write_json(js, summary.to_dict())
    return md, js


def read_summary(folder: Path) -> Summary | None:
    """folder/summary.json, or None when there is none; a damaged one is a CampaignError."""
    path = Path(folder) / SUMMARY_RECORD
    if not path.is_file():
        return None
    redo = f"`python -m submission score {folder}` writes it again from the result files"
    try:
        return Summary.from_dict(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise CampaignError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}); {redo}") from None
    except (TypeError, AttributeError) as exc:
        raise CampaignError(f"{path} is not a summary record ({exc}); {redo}") from None


def run_progress(folder: Path, index: int | str, suffix: str) -> Path:
    """progress/run_<index><suffix> of a system folder: ".log" for the printed output,
    ".jsonl" for the records."""
    return Path(folder) / "progress" / f"run_{index}{suffix}"


def progress_log(config: Config, index: int) -> Path:
    """The printed output of run `index` (every rank's lines, as the terminal showed them)."""
    return run_progress(system_dir(config), index, ".log")


def progress_records(config: Config, index: int) -> Path:
    """Rank 0's machine-readable progress of run `index` (JSON lines, submission.progress)."""
    return run_progress(system_dir(config), index, ".jsonl")


def tensorboard_dir(config: Config, index: int) -> Path:
    """Run `index`'s TensorBoard events (tracker=tensorboard)."""
    return system_dir(config) / "tensorboard" / f"run_{index}"


def tracking_target(config: Config, index: int) -> list[str]:
    """Run `index`'s tracking argument for submission.train: its TensorBoard folder, W&B's
    files in the system folder, the campaign as W&B's group."""
    return Target(tuple(config.trackers), str(tensorboard_dir(config, index)), str(system_dir(config)),
                  f"run_{index}", config.system_name).argv()
