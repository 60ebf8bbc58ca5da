"""What a W&B offline run folder holds, read back with the wandb package's own record type.

wandb 0.31 keeps an offline run in one `run-<id>.wandb` file (no config.yaml or summary beside
it until it is synced) and ships no reader for it: the file is a log of length-prefixed
protobuf records in 32 KiB blocks (LevelDB's log format behind a 7-byte ":W&B" header), each a
`wandb_internal_pb2.Record`. This reads the run's config and its history rows."""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2
    raw = Path(path).read_bytes()
    assert raw[:4] == b":W&B", f"{path} is not a W&B run file"
    found, position, pending = [], HEADER, b""
    while position + HEADER <= len(raw):
        if BLOCK - position % BLOCK < HEADER:          # a block's tail too short for a header
            position += BLOCK - position % BLOCK
            continue
        _checksum, length, kind = struct.unpack("<IHB", raw[position:position + HEADER])
        if kind == 0:
            break
        pending += raw[position + HEADER:position + HEADER + length]
        position += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
            pending = b""
    return found


def finished_records(path: Path, within_s: float = 60.0) -> list:
    """The records of a finished run: wandb's service (wandb-core, a process of its own)
    writes the file behind the run's finish(), so it is read again until its exit record is
    there (a read in between can end inside a record)."""
    from google.protobuf.message import DecodeError
    deadline = time.monotonic() + within_s
    while True:
        try:
            found = records(path)
            if any(record.WhichOneof("record_type") == "exit" for record in found):
                return found
        except (DecodeError, AssertionError):     # cut inside a record, or before the file's header
            pass
        assert time.monotonic() < deadline, f"{path} holds no exit record after {within_s:g} s: the run did not finish"
        time.sleep(0.2)


def offline_run(folder: Path) -> dict:
    """A finished offline run folder's name, group, config and history ({key: value} rows)."""
    (path,) = Path(folder).glob("run-*.wandb")
    run, history = None, []
    for record in finished_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item})
    assert run is not None, f"{path} holds no run record"
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    return {"name": run.display_name, "group": run.run_group, "project": run.project,
            "config": config, "history": history}
