"""JSON files written atomically: a kill or a full disk mid-write leaves the old file or
the new one, never half of one; and a record (a dataclass) as a JSON object and back.

The campaign's records (results.py) and the data preparation's (data.json, the image
manifests of data/image_checks.py) are written here. This module imports nothing of the
package but durable.py, so that every writer can use it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .durable import put_in_place

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Record = TypeVar("Record", bound="DataclassInstance")


def write_json(path: Path, data: object, *, compact: bool = False) -> None:
    """Write `data` as JSON to `path` under a temporary name, then put it in place
    (durable.put_in_place: flushed to the disk, renamed over it, the folder flushed).
    Indented one space a level (for people) unless `compact`: no whitespace at all, for a
    file too large to be read by eye (an entry per image, 1.3 M on ImageNet)."""
    path = Path(path)
    text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=1)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text + "\n")
        put_in_place(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def record_from_dict(cls: type[Record], data: Any, *, strict: bool = False) -> Record:
    """The dataclass `cls` from a JSON object, its parts too (a field whose type is a
    dataclass, a list or tuple of them, or either or None). Keys `cls` does not have are
    left out, for a file a later release wrote; with `strict`, a ValueError names them and
    the keys missing (a record that must be exactly what this release writes)."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: needs a JSON object, got {type(data).__name__}")
    declared = [f for f in dataclasses.fields(cls) if f.init]
    if strict:
        names = {f.name for f in declared}
        required = {f.name for f in declared
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        missing, unknown = sorted(required - data.keys()), sorted(data.keys() - names)
        if missing or unknown:
            raise ValueError(f"{cls.__name__}: missing keys {missing}, unknown keys {unknown} "
                             f"(a {cls.__name__} has {sorted(names)}); was the file written by another "
                             "version of the harness?")
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _part(hints[f.name], data[f.name], strict) for f in declared if f.name in data})


def _part(hint: Any, value: Any, strict: bool) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds = [arg for arg in args if arg is not type(None)]
        return _part(kinds[0], value, strict) if len(kinds) == 1 else value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return record_from_dict(hint, value, strict=strict)
    if origin in (list, tuple) and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        parts = [record_from_dict(args[0], item, strict=strict) for item in value]
        return tuple(parts) if origin is tuple else parts
    return value
