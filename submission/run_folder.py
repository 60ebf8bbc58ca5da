"""The results folder, file by file: a campaign's folder, a tradeoff grid's and its points',
and the files of one run in either. Every other module names these files through here.

    <results_dir>/                          ResultsRoot
      <system_name>/                        CampaignFolder: one campaign
        campaign.json                       its record (results.CampaignRecord)
        config.json, data.json              what the runs read: the resolved configuration, the .beton files
        system.json                         the MLPerf system description as run
        resnet/result_<i>.txt               complete runs only (an MLPerf benchmark folder;
                                            result_<i>.txt.partial while the run writes it)
        summary.md, summary.json            the score (results.Summary)
        report.md, *.png                    the report (report.campaign_report)
        progress/run_<i>.log                a run's printed output, for people
        progress/run_<i>.jsonl              rank 0's progress records, as data
        tensorboard/run_<i>/                a run's TensorBoard events (tracker=tensorboard)
        wandb/                              W&B's own files of the runs (tracker=wandb)
        attempts/                           what interrupted or failed runs left, kept aside, never deleted:
                                            result_<i>-<time>.txt (its partial log), .log (its printed
                                            output), .jsonl (its progress records), -tensorboard/
        config.node<k>.json, data.node<k>.json, state.node<k>.json   node k's own (k > 0: a follower)
      archive/<system_name>-<time>/         a campaign moved aside by new_campaign=true
      package/<org>/                        the submission package
      tradeoff/<grid>/<system_name>/        GridFolder: a grid's points on one machine
        grid.json, system.json              the grid as read; the machine the points ran on
        attempts/                           interrupted points' logs; points redone, each in a folder
        points/<slug>/                      PointFolder: config.json, data.json, log.txt
                                            (log.txt.partial while it runs), point.json,
                                            progress.jsonl, run.log, tensorboard/, wandb/
      tradeoff/published/                   the published points projected to systems
      qualify/<system_name>-<time>/         a qualify record

Nothing here reads or writes a file: the modules that own each record do (results,
tradeoff.points, campaign). Only paths, so that this module sits below all of them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

BENCHMARK = "resnet"          # the MLPerf benchmark folder of result files
PARTIAL = ".partial"          # the suffix of a result log while its run writes it
_RESULT_NAME = re.compile(r"^result_(\d+)\.txt$")


def result_name(index: int) -> str:
    return f"result_{index}.txt"


def partial_of(result: Path) -> Path:
    """The name a result log has while its run writes it (result_0.txt.partial)."""
    return result.with_name(result.name + PARTIAL)


def result_index(path: Path | str) -> str | None:
    """The run index in a result file's name ("3" of result_3.txt), None for another name."""
    found = _RESULT_NAME.match(Path(path).name)
    return found.group(1) if found else None


@dataclass(frozen=True)
class RunFiles:
    """What one run of the worker writes: its MLPerf log (under `partial`'s name until the
    run ends), rank 0's progress records, its printed output, its trackers' folders."""
    result: Path
    records: Path
    transcript: Path
    events: Path              # TensorBoard
    wandb: Path               # the folder W&B keeps its files in

    @property
    def partial(self) -> Path:
        return partial_of(self.result)

    def left_by_an_attempt(self) -> list[Path]:
        """What an attempt that did not finish left (its partial log, printed output, progress
        records, TensorBoard events): set aside before the run is redone."""
        return [path for path in (self.partial, self.transcript, self.records, self.events) if path.exists()]


@dataclass(frozen=True)
class KeptAttempt:
    """attempts/<stem>-<time>.*: an attempt that did not finish, set aside, never deleted."""
    folder: Path
    name: str                 # <stem>-<time>: result_2-20260101-120000, a point's slug-<time>

    def place_of(self, run: RunFiles) -> dict[Path, Path]:
        """Where each file of `run` goes: the partial log .txt, its printed output .log, its
        progress records .jsonl, its TensorBoard folder -tensorboard."""
        return {run.partial: self.folder / f"{self.name}.txt", run.transcript: self.folder / f"{self.name}.log",
                run.records: self.folder / f"{self.name}.jsonl", run.events: self.folder / f"{self.name}-tensorboard"}


@dataclass(frozen=True)
class CampaignFolder:
    """results/<system_name>/: one campaign's runs, its record, its score."""
    path: Path

    @property
    def record(self) -> Path:
        return self.path / "campaign.json"

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def data(self) -> Path:
        return self.path / "data.json"

    @property
    def system(self) -> Path:
        return self.path / "system.json"

    @property
    def benchmark(self) -> Path:
        return self.path / BENCHMARK

    @property
    def summary_text(self) -> Path:
        return self.path / "summary.md"

    @property
    def summary_record(self) -> Path:
        return self.path / "summary.json"

    @property
    def report(self) -> Path:
        """report.md: the campaign's report (its plots beside it: report.plots)."""
        return self.path / "report.md"

    @property
    def attempts(self) -> Path:
        return self.path / "attempts"

    def result(self, index: int) -> Path:
        """The MLPerf result file of run `index` (0-based), present once the run is complete."""
        return self.benchmark / result_name(index)

    def result_files(self) -> list[Path]:
        """resnet/result_<i>.txt, in run order (result_10 after result_9)."""
        if not self.benchmark.is_dir():
            return []
        found = [(int(index), p) for p in self.benchmark.iterdir()
                 if p.is_file() and (index := result_index(p)) is not None]
        return [p for _, p in sorted(found)]

    def progress(self, index: int | str, suffix: str) -> Path:
        """progress/run_<index><suffix>: ".log" for the printed output, ".jsonl" for the records."""
        return self.path / "progress" / f"run_{index}{suffix}"

    def run(self, index: int) -> RunFiles:
        return RunFiles(self.result(index), self.progress(index, ".jsonl"), self.progress(index, ".log"),
                        self.path / "tensorboard" / f"run_{index}", self.path)

    def progress_of(self, result: Path | str, suffix: str = ".jsonl") -> Path | None:
        """The progress of the run whose result file is `result` (its records; suffix ".log":
        its printed lines), None for a file not named as a result."""
        index = result_index(result)
        return self.progress(index, suffix) if index is not None else None

    def follower_files(self, node_rank: int) -> tuple[Path, Path, Path]:
        """Node `node_rank`'s own configuration, data and state files (followers sharing one
        results folder keep apart)."""
        node = f"node{node_rank}"
        return (self.path / f"config.{node}.json", self.path / f"data.{node}.json",
                self.path / f"state.{node}.json")


@dataclass(frozen=True)
class PointFolder:
    """points/<slug>/: one tradeoff point's run and its figures."""
    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def data(self) -> Path:
        return self.path / "data.json"

    @property
    def record(self) -> Path:
        """point.json: the point's figures (tradeoff.analysis.Point)."""
        return self.path / "point.json"

    @property
    def run(self) -> RunFiles:
        return RunFiles(self.path / "log.txt", self.path / "progress.jsonl", self.path / "run.log",
                        self.path / "tensorboard", self.path)

    def run_paths(self) -> list[Path]:
        """What a point's run made, moved aside together when the point is redone (its
        config.json and data.json stay)."""
        run = self.run
        return [run.result, run.partial, self.record, run.records, run.transcript, run.events]


@dataclass(frozen=True)
class GridFolder:
    """tradeoff/<grid>/<system_name>/: a grid's points on one machine."""
    path: Path

    @property
    def grid(self) -> Path:
        return self.path / "grid.json"

    @property
    def system(self) -> Path:
        return self.path / "system.json"

    @property
    def attempts(self) -> Path:
        return self.path / "attempts"

    def point(self, slug: str) -> PointFolder:
        return PointFolder(self.path / "points" / slug)


# the harness's own folders beside the campaigns' (no system may be named so)
ARCHIVE, PACKAGE, TRADEOFF, QUALIFY = "archive", "package", "tradeoff", "qualify"
HARNESS_FOLDERS = (ARCHIVE, PACKAGE, TRADEOFF, QUALIFY)


@dataclass(frozen=True)
class ResultsRoot:
    """results_dir: the campaigns' folders, and what is made beside them."""
    path: Path

    def campaign(self, system_name: str) -> CampaignFolder:
        return CampaignFolder(self.path / system_name)

    def archive(self, system_name: str, stamp: str) -> Path:
        return self.path / ARCHIVE / f"{system_name}-{stamp}"

    @property
    def packages(self) -> Path:
        return self.path / PACKAGE

    def grid(self, grid_name: str, system_name: str) -> GridFolder:
        return GridFolder(self.path / TRADEOFF / grid_name / system_name)

    @property
    def published_points(self) -> Path:
        return self.path / TRADEOFF / "published"

    def qualify(self, system_name: str, stamp: str) -> Path:
        return self.path / QUALIFY / f"{system_name}-{stamp}"
