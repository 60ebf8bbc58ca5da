"""What a rank will train and evaluate on, as facts that ranks can compare.

Only the configuration is broadcast from rank 0: every node prepares its own data from its
own command line (campaign.follow_campaign) and each rank reads its own node's data.json.
Nodes given other data (another train_limit, data set or write setting) would plan other
step counts, and the run would abort inside a collective ("collective mismatch" on gloo)
or hang (NCCL); counts that differ but give the same number of steps would silently
overlap or drop shards. train.main gathers every rank's fingerprint before run_start and
stops every rank, with the message of `unlike_data`, when they differ.

A fingerprint holds, for each split, the sample count, the .beton file's size and the
sha256 of its head (beton_cache.head_sha256, which prepare records in data.json when it
writes or reuses the file); the number of classes; and the write settings the node
prepared with (recorded in data.json as well).
Nothing here opens a .beton: before run_start the run reads none of the data (file sizes
come from the file system). Paths are left out: nodes may keep identical files in other
places.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

from ..config import Config
from .data_json import PreparedData

ADVICE = ("prepare the same data on every node: the same dataset, data_dir, train_limit, "
          "eval_limit, val_labels, skip_bad_images and write_* settings on every node's "
          "command line (or one cache_dir that every node shares), then run the same command "
          "again on every node")


def file_facts(path: str | Path, head_sha256: str) -> dict:
    """{"bytes": its size, "header_sha256": the head hash prepare recorded}, or
    {"unreadable": why} for a file the file system does not know. The file is not opened."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        return {"unreadable": f"{type(exc).__name__}: {exc.strerror or exc}"}
    return {"bytes": size, "header_sha256": head_sha256 or "(not recorded: prepare again)"}


def fingerprint(data: PreparedData) -> dict:
    """The facts of `data` that every rank of a run must share, as a flat JSON-able dict."""
    facts = {"train_samples": data.train_samples, "eval_samples": data.eval_samples,
             "num_classes": data.num_classes}
    for split, path, head in (("train", data.train_path, data.train_head_sha256),
                              ("eval", data.val_path, data.val_head_sha256)):
        for key, value in file_facts(path, head).items():
            facts[f"{split}_file_{key}"] = value
    facts.update(data.write_settings or {"write_settings": "(not recorded: prepare again)"})
    return facts


def of_rank(data_file: str | Path, config: Config) -> dict:
    """This rank's fingerprint with where it runs: {"node_rank", "hostname", "data"}.
    Never raises: a data description that cannot be read becomes the fact
    {"data.json": why}, so that every rank reaches the gathering of fingerprints and
    learns why the run stops (a rank that raised instead would leave the others waiting
    for it in a collective)."""
    try:
        facts = fingerprint(PreparedData.load(Path(data_file)))
    except Exception as exc:  # noqa: BLE001 - any failure is a fact for the comparison
        facts = {"data.json": f"{data_file} unreadable ({type(exc).__name__}: {exc})"}
    return {"node_rank": config.node_rank, "hostname": socket.gethostname(), "data": facts}


def _shown(facts: dict, key: str) -> str:
    if key not in facts:
        return "(none)"
    value = facts[key]
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:16] + "..."      # a sha256: its first 16 hex digits tell two apart
    return repr(value) if isinstance(value, str) else str(value)


def unlike_data(ranks: list[dict], most: int = 8) -> str | None:
    """None when every rank's fingerprint equals rank 0's; else a message that names, for
    each rank that differs (the first `most` of them), its rank, node and host, each field
    that differs with rank 0's value and its own, and what to do. `ranks`: of_rank of
    every rank, in rank order. Decides only: neither prints nor raises."""
    if not ranks:
        return None
    first = ranks[0]
    reference = first.get("data", {})
    blocks = []
    for rank, seen in enumerate(ranks):
        facts = seen.get("data", {})
        fields = [*reference, *(key for key in facts if key not in reference)]
        differ = [key for key in fields if reference.get(key) != facts.get(key)]
        if not differ:
            continue
        where = f"node {seen.get('node_rank', '?')}, host {seen.get('hostname', '?')}"
        lines = [f"  rank {rank} ({where}):"]
        lines += [f"    {key}: rank 0 has {_shown(reference, key)}, rank {rank} has "
                  f"{_shown(facts, key)}" for key in differ]
        blocks.append("\n".join(lines))
    if not blocks:
        return None
    more = f"\n  ... and {len(blocks) - most} more ranks" if len(blocks) > most else ""
    return (f"the ranks would train or evaluate on different data ({len(blocks)} of {len(ranks)} "
            f"ranks differ from rank 0 on node {first.get('node_rank', '?')}, host "
            f"{first.get('hostname', '?')}); stopped before run_start, as their step counts or "
            "shards would not match:\n" + "\n".join(blocks[:most]) + more + f"\nFix: {ADVICE}.")
