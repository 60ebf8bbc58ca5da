"""The bench profile: the rates `python -m submission bench ... json=FILE` measures on a
machine and `project`, `tradeoff` and `qualify` read, as one versioned type with its writer
and its reader.

Every field is declared once below, with what its JSON value is (`figure`: a Declaration of
setting_declaration.py, as settings and options are): the writer writes the dataclasses, the
reader checks a file against the same declarations and builds them. A field without a default
is needed; an optional one may be absent or null. A side is a whole number of px, written as a
string key. Schema 2 is written and read; the schema-1 files of 2026-11-22/23 were converted once (CHANGELOG.md).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from . import settings as declared
from .config import Config, ConfigError
from .jsonfile import write_json
from .setting_declaration import ABOVE_0, AT_LEAST_0, AT_LEAST_1, Declaration

SCHEMA = 2
WRITTEN_BY = "a profile is what `python -m submission bench ... json=FILE` writes"
# the settings the bench ran with that a profile records (submission/settings.py marks them),
# and those whose difference from the projected run's makes the measured rates doubtful
RECORDED_SETTINGS = ("system", *declared.profiled())
RATE_SETTINGS = tuple(declared.profiled(declared.COMPARED))
LOADER_KINDS = declared.words_admitted("train_loader")
LOADER_NAMES = {"ffcv": "FFCV", "torchvision": "torchvision", "device": "device"}   # each kind, for people
# the bench's per-image CPU work of the torchvision loader, each on one thread (ms per image)
AUGMENTATION_STAGES = ("decode", "crop_flip", "randaugment", "to_tensor", "total")


# ---- what a field's JSON value is: each a Declaration whose meaning says it in words -----
OBJECT = Declaration("an object", type=dict)
RATE = Declaration("a number of images per second > 0", type=float, admits=ABOVE_0)
COUNT = Declaration("a whole number >= 1", type=int, admits=AT_LEAST_1)
WHOLE = Declaration("a whole number >= 0", type=int, admits=AT_LEAST_0)
SECONDS = Declaration("a number of seconds >= 0", type=float, admits=AT_LEAST_0)
NUMBER = Declaration("a number", type=float)
POSITIVE = Declaration("a number > 0", type=float, admits=ABOVE_0)
TEXT = Declaration("a text", type=str)
BOOL = Declaration("true or false", type=bool)
KIND = Declaration("one of " + ", ".join(LOADER_KINDS), type=str, admits=LOADER_KINDS)


def figure(value: Declaration, default: Any = MISSING, *, part: type | None = None, sides: type | None = None,
           keys: dict[str, tuple[Declaration, bool]] | None = None) -> Any:
    """A field of a profile's part: what its value is (`value`), and what it holds: a part of its
    own (`part`), one part per side (`sides`), or named values, each declared, with whether each
    is needed (`keys`). No default: the field is needed."""
    metadata = {"declaration": value, "part": part, "sides": sides, "keys": keys or {}}
    return field(metadata=metadata) if default is MISSING else field(default=default, metadata=metadata)


class ProfileError(ConfigError):
    """The profile is missing, unreadable or lacks a figure the projection needs."""


@dataclass(frozen=True)
class Measured:
    date: str | None = figure(TEXT, None)
    host: str | None = figure(TEXT, None)
    device: str | None = figure(TEXT, None)
    device_name: str | None = figure(TEXT, None)
    torch: str | None = figure(TEXT, None)
    python: str | None = figure(TEXT, None)
    pillow: str | None = figure(TEXT, None)            # "Pillow 13.0.0", "Pillow-SIMD 12.1.1.post0"
    steps: int | None = figure(COUNT, None)
    rounds: int | None = figure(COUNT, None)


@dataclass(frozen=True)
class SideStep:
    img_per_s: float = figure(RATE)
    first_step_s: float = figure(SECONDS)
    timed_steps: int | None = figure(COUNT, None)
    sam_steps: int | None = figure(WHOLE, None)


@dataclass(frozen=True)
class Loader:
    kind: str = figure(KIND)
    img_per_s: float = figure(RATE)
    threads: int = figure(COUNT)
    resolution: int | None = figure(COUNT, None)
    epoch_start_s: float | None = figure(SECONDS, None)
    device_memory_bytes: int | None = figure(WHOLE, None)     # its peak on a GPU (buffers, batches)

    @property
    def img_per_s_per_thread(self) -> float:
        return self.img_per_s / self.threads


@dataclass(frozen=True)
class FedStep:
    """The step fed by the loader and the synthetic step, at one side."""
    fed_img_per_s: float = figure(RATE)
    synthetic_img_per_s: float = figure(RATE)
    in_turns: bool = figure(BOOL)


@dataclass(frozen=True)
class LoaderBeside:
    """Another loader measured in the same bench, beside the run's (`loader`): the device
    loader beside FFCV's or torchvision's, or the recipe's own beside the device loader."""
    loader: Loader = figure(OBJECT, part=Loader)
    fed_step_by_side: dict[int, FedStep] = figure(OBJECT, sides=FedStep)
    eval_img_per_s: float = figure(RATE)


@dataclass(frozen=True)
class SetupExtra:
    first_eval_extra: float = figure(SECONDS)
    in_run_first_epoch_extra: float | None = figure(SECONDS, None)


@dataclass(frozen=True)
class LoaderProbe:
    """The run's loaders in a fresh process after run_start."""
    train_first_batch_s: float = figure(SECONDS)
    val_first_pass_s: float = figure(SECONDS)
    warm_up_s: float | None = figure(SECONDS, None)
    build_s: float | None = figure(SECONDS, None)
    epoch_start_s: float | None = figure(SECONDS, None)


@dataclass(frozen=True)
class LoaderSetup:
    cold: LoaderProbe = figure(OBJECT, part=LoaderProbe)
    warm: LoaderProbe = figure(OBJECT, part=LoaderProbe)


@dataclass(frozen=True)
class LoopOverhead:
    normalize_resize_s: float = figure(SECONDS)
    ema_s: float = figure(SECONDS)
    side: int | None = figure(COUNT, None)
    share_of_step: float | None = figure(NUMBER, None)
    tracking_s: float | None = figure(SECONDS, None)   # the trackers' work per step (tracker=)


@dataclass(frozen=True)
class Augmentation:
    decode: float = figure(SECONDS)
    crop_flip: float = figure(SECONDS)
    randaugment: float = figure(SECONDS)
    to_tensor: float = figure(SECONDS)
    total: float = figure(SECONDS)
    images: int | None = figure(COUNT, None)
    threads: int | None = figure(COUNT, None)
    resolution: int | None = figure(COUNT, None)
    source: str | None = figure(TEXT, None)
    augmentation: str | None = figure(TEXT, None)      # what the `randaugment` stage ran (TrivialAugment too)


@dataclass(frozen=True)
class Power:
    """Energy counters read around the recipe step at full size (submission.energy): the
    process's device, or the CPU packages; or why they could not be read."""
    watts: float | None = figure(POSITIVE, None)
    joules_per_image: float | None = figure(POSITIVE, None)
    seconds: float | None = figure(SECONDS, None)
    side: int | None = figure(COUNT, None)
    source: str | None = figure(TEXT, None)
    power_limit_watts: float | None = figure(POSITIVE, None)
    idle_watts: float | None = figure(POSITIVE, None)      # the same counters with nothing running
    not_measured: str | None = figure(TEXT, None)


@dataclass(frozen=True)
class BenchProfile:
    measured: Measured = figure(OBJECT, part=Measured)
    settings: dict[str, Any] = figure(OBJECT, keys={"sam_interval": (WHOLE, True),
                                                    "batch_per_device": (COUNT, False),
                                                    "train_resolution": (COUNT, False)})
    train_step: dict[int, SideStep] = figure(OBJECT, sides=SideStep)
    eval_img_per_s: float = figure(RATE)               # evaluation through the loader (second pass)
    loader: Loader = figure(OBJECT, part=Loader)
    fed_step_by_side: dict[int, FedStep] = figure(OBJECT, sides=FedStep)   # {}: none measured
    loader_beside: LoaderBeside | None = figure(OBJECT, None, part=LoaderBeside)
    setup_s: SetupExtra | None = figure(OBJECT, None, part=SetupExtra)
    loader_setup_s: LoaderSetup | None = figure(OBJECT, None, part=LoaderSetup)
    loop_overhead: LoopOverhead | None = figure(OBJECT, None, part=LoopOverhead)
    augmentation_ms_per_image: Augmentation | None = figure(OBJECT, None, part=Augmentation)
    eval_forward_img_per_s: float | None = figure(RATE, None)
    step_img_per_s: float | None = figure(RATE, None)
    plain_loop_img_per_s: float | None = figure(RATE, None)
    mfu: dict[str, Any] | None = figure(OBJECT, None)               # recorded for people
    compiled: dict[str, Any] | None = figure(OBJECT, None)          # recorded for people
    power: Power | None = figure(OBJECT, None, part=Power)
    # the file it was read from: not a figure, not written
    file: str = field(default="", compare=False, metadata={"written": False})

    @property
    def sam_interval(self) -> int:
        return self.settings["sam_interval"]

    @property
    def compiled_img_per_s(self) -> dict[int, float]:
        """The compiled step's rate at each side a `bench compile=true` compiled it ({}: the
        profile of an eager bench)."""
        return {int(side): row["img_per_s"] for side, row in (self.compiled or {}).items() if side.isdigit()}

    @property
    def of_the_compiled_step(self) -> bool:
        """Whether the profile measures the compiled step: a compiled bench that timed the eager
        step only beside the compiled rows (quick=true, as qualify runs it), so that it cannot
        project an eager run."""
        compiled = self.compiled_img_per_s
        return bool(compiled) and self.train_step.keys() <= compiled.keys()


def file_name(key: str) -> str:
    """A profile's file in a folder of profiles (qualify's record): profile_<recipe>.json for a
    recipe's eager bench, profile_<recipe>-compiled[-graphs].json for its compiled ones."""
    return f"profile_{key}.json"


def recorded_settings(config: Config) -> dict[str, Any]:
    return {name: config.system_id if name == "system" else getattr(config, name)
            for name in RECORDED_SETTINGS}


# ---- writer ----------------------------------------------------------------
def _json_part(value: Any) -> Any:
    """A part as JSON data: dataclasses as objects without their absent (None) fields,
    sides as string keys."""
    if dataclasses.is_dataclass(value):
        return {f.name: _json_part(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get("written", True) and getattr(value, f.name) is not None}
    if isinstance(value, dict):
        return {str(key): _json_part(item) for key, item in value.items()}
    return value


def to_json(profile: BenchProfile) -> dict[str, Any]:
    data = {"schema": SCHEMA, **_json_part(profile)}
    data["loader"]["img_per_s_per_thread"] = profile.loader.img_per_s_per_thread   # for people
    return data


def write(profile: BenchProfile, path: Path | str) -> None:
    write_json(Path(path), to_json(profile))


# ---- reader --------------------------------------------------------------------
_ABSENT = object()


def _written(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("written", True)]


def _needed(f: dataclasses.Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _part_problems(cls: type, data: dict[str, Any], prefix: str) -> list[str]:
    """Each field of `cls` in `data` that is not what its declaration checks, named."""
    found = []
    for f in _written(cls):
        name, value = prefix + f.name, data.get(f.name, _ABSENT)
        if value in (_ABSENT, None) and not _needed(f):
            continue
        declared = f.metadata["declaration"]
        if value is _ABSENT or not declared.admitted(value):
            found.append(f"{name} is {'missing' if value is _ABSENT else json.dumps(value)}, "
                         f"not {declared.meaning}")
            continue
        meta = f.metadata
        if meta["part"]:
            found += _part_problems(meta["part"], value, f"{name}.")
        for side, item in value.items() if meta["sides"] else ():
            if not (side.isascii() and side.isdigit()):
                found.append(f"{name} side {side!r} is not a whole number of px")
            elif not isinstance(item, dict):
                found.append(f"{name}.{side} is {json.dumps(item)}, not an object")
            else:
                found += _part_problems(meta["sides"], item, f"{name}.{side}.")
        for key, (declared_key, needed) in meta["keys"].items():
            item = value.get(key, _ABSENT)
            if (item is _ABSENT and needed) or (item is not _ABSENT and not declared_key.admitted(item)):
                found.append(f"{name}.{key} is {'missing' if item is _ABSENT else json.dumps(item)}, "
                             f"not {declared_key.meaning}")
    return found


def problems(data: dict[str, Any]) -> list[str]:
    """Each field of a profile that is not of the type and range the bench writes, named."""
    return _part_problems(BenchProfile, data, "")


def _build(cls: type, data: dict[str, Any] | None) -> Any:
    """`cls` from its checked JSON object (fields it does not know are left out), None from null."""
    if data is None:
        return None
    values = {}
    for f in _written(cls):
        if f.name not in data:
            continue
        value, meta = data[f.name], f.metadata
        if meta.get("part"):
            value = _build(meta["part"], value)
        elif meta.get("sides"):
            value = {int(side): _build(meta["sides"], item) for side, item in value.items()}
        values[f.name] = value
    return cls(**values)


def _json_kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds: dict[type, str] = {list: "an array", str: "a string"}
    return kinds.get(type(value), "a number")


def _schema_problem(data: Any) -> str | None:
    """What keeps `data` from being a profile of a schema this module reads, in words."""
    if not isinstance(data, dict):
        return f"is JSON, but not a bench profile: it is {_json_kind(data)}, not an object; {WRITTEN_BY}"
    if data.get("schema") is None:
        return f"is JSON, but not a bench profile: it has no \"schema\" field; {WRITTEN_BY}"
    schema = data["schema"]
    if WHOLE.admitted(schema) and schema > SCHEMA:
        return (f"is a schema-{schema} bench profile, newer than this harness reads (schema "
                f"{SCHEMA}), written by a later version of the harness: project it "
                "with that version, or measure again with this one")
    if schema == 1:
        return ("is a schema-1 bench profile (written before 2026-11-25), which this version no "
                "longer reads: measure it again (the bench command below), or convert it with a "
                "release before 2026-11-26 (it read and upgraded schema 1)")
    if not WHOLE.admitted(schema) or schema != SCHEMA:
        return (f"has \"schema\": {json.dumps(schema)}, which is no bench profile schema this "
                f"harness reads ({SCHEMA}); {WRITTEN_BY}")
    return None


def _error(option: str, source: str, wrong: str, remedy: str) -> ProfileError:
    return ProfileError(f"{option} {source} {wrong}" + (f"; {remedy}" if remedy else ""))


def parse(data: Any, source: str, option: str = "profile", remedy: str = "") -> BenchProfile:
    """The profile in `data` (JSON read from `source`). A problem raises ProfileError naming
    the option, the file and each field wrong, then `remedy`."""
    wrong = _schema_problem(data)
    if wrong:
        raise _error(option, source, wrong, remedy)
    found = problems(data)
    if found:
        raise _error(option, source, f"is not a bench profile the projection can use: "
                                     f"{'; '.join(found)}", remedy)
    return dataclasses.replace(_build(BenchProfile, data), file=source)


def read(path: Path | str, option: str = "profile", remedy: str = "") -> BenchProfile:
    """The profile in the file at `path`, given by `option` (profile=, loader_profile=): a
    file that is missing, not JSON or not a usable profile raises ProfileError saying so,
    with the option, the file and `remedy` (the command that makes the right file)."""
    def fail(wrong: str) -> ProfileError:
        return _error(option, str(path), wrong, remedy)

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise fail("does not exist") from None
    except json.JSONDecodeError as exc:
        raise fail(f"is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:     # a folder, no permission, a binary file
        raise fail(f"cannot be read as a JSON text file ({type(exc).__name__}: {exc})") from None
    return parse(data, str(path), option, remedy)


def eager_beside(profile: BenchProfile) -> BenchProfile | None:
    """The eager profile of the same recipe and device in the folder of a compiled one, as
    qualify's record holds them (file_name); None for an eager profile, or where there is none."""
    recipe = profile.settings.get("recipe")
    if not profile.compiled_img_per_s or not profile.file or not recipe:
        return None
    path = Path(profile.file).parent / file_name(recipe)
    if not path.is_file():
        return None
    beside = read(path)
    same = (not beside.compiled_img_per_s and beside.settings.get("recipe") == recipe
            and beside.measured.device_name == profile.measured.device_name
            and beside.settings.get("batch_per_device") == profile.settings.get("batch_per_device"))
    return beside if same else None
