"""What one qualify holds while it runs: its scratch folder under cache_dir (the data it makes,
its short campaign, its profiles), locked, so that a second qualify on the same cache_dir is
refused naming the first; and its record's folder, never another qualify's record: out= must
be new or empty, and without it a fresh name is chosen (the first line says which)."""
from __future__ import annotations

from pathlib import Path
from typing import TextIO

from .. import file_lock
from ..config import ConfigError
from ..results import CampaignError
from . import record


def scratch_held(scratch: Path) -> TextIO:
    """The lock on `scratch`, held until the returned file is closed; a CampaignError saying
    who holds it and what to do when another qualify does."""
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        return file_lock.take(scratch / ".lock")
    except file_lock.Held as held:
        raise CampaignError(
            f"another qualify (pid {held.holder}) is using {scratch} (its data, short campaign and "
            "profiles): wait for it to end, or give this one a cache_dir of its own") from None


def record_folder(given: str, default: Path) -> Path:
    """Where the record goes: out= (`given`), refused when it holds anything already; else
    `default`, or default-2, -3, ... where that is taken."""
    if given:
        out = Path(given)
        held = sorted(p.name for p in out.iterdir()) if out.is_dir() else [out.name] if out.exists() else []
        if held:
            raise ConfigError(
                f"out={given} holds {', '.join(held[:3])}{', ...' if len(held) > 3 else ''} already: "
                "qualify writes its record into a new or empty folder, never over another; give "
                "another out=DIR, or move that one away")
        return out
    out, number = default, 1
    while out.exists():
        number += 1
        out = default.with_name(f"{default.name}-{number}")
    return out


def open_log(out: Path) -> TextIO:
    """out/qualify.log, made by this qualify (never one another made meanwhile)."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        return open(out / record.LOG, "x")
    except FileExistsError:
        raise ConfigError(f"{out / record.LOG} was made meanwhile by another qualify: give this one "
                          "another out=DIR") from None
