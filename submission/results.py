"""The results folder: where a campaign's files lie, how its JSON is read back, and the
error every reader of it raises.

    <results_dir>/<system_name>/
      campaign.json, config.json, data.json, system.json   (written with jsonfile.write_json)
      resnet/result_<i>.txt                                 complete runs only
      progress/run_<i>.log                                  a run's printed output, for people
      progress/run_<i>.jsonl                                rank 0's progress records, as data

The campaign writes here; score, report and package read it. This module sits below
all of them and imports none of them, so that they share it without importing one
another.
"""
from __future__ import annotations

import json
from pathlib import Path

from .config import REPO_ROOT, Config


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
    root = Path(config.results_dir)
    return root if root.is_absolute() else REPO_ROOT / root


def system_dir(config: Config) -> Path:
    """results/<system_name>/: one campaign's folder."""
    return results_root(config) / config.system_name


def result_path(config: Config, index: int) -> Path:
    """The MLPerf result file of run `index` (0-based), present once the run is complete."""
    return system_dir(config) / "resnet" / f"result_{index}.txt"


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
