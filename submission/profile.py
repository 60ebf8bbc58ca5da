"""The bench profile: the rates `python -m submission bench ... json=FILE` measures on a
machine and `project` reads, as one versioned type, with its writer and its reader.

Version 2 is written (version 1 until 2026-11-25). A version-1 file is read through `upgrade_v1`, the one place that
knows what the older layout lacked and how the projection read each absence; nothing
else sees a version-1 layout. The layout, version 2 (a side is a whole number of px,
written as a string key; "optional" parts may be absent or null):

  measured              date, host, device, device_name, torch, python, steps, rounds
  settings              the run settings the bench ran with (RECORDED_SETTINGS); a name
                        absent was not recorded; sam_interval is required
  train_step            side -> img_per_s, first_step_s [, timed_steps, sam_steps]
  eval_img_per_s        evaluation through the loader (second pass)
  loader                kind, img_per_s, threads [, resolution, epoch_start_s]
  fed_step_by_side      side -> fed_img_per_s, synthetic_img_per_s, in_turns (whether the
                        synthetic step was timed in turns with the fed one); {} none measured
  optional: setup_s (first_eval_extra [, in_run_first_epoch_extra]), loader_setup_s (cold,
  warm: train_first_batch_s, val_first_pass_s [, warm_up_s, build_s, epoch_start_s]),
  loop_overhead (normalize_resize_s, ema_s [, side, share_of_step]),
  augmentation_ms_per_image (AUGMENTATION_STAGES [, images, threads, resolution, source]),
  eval_forward_img_per_s, step_img_per_s, plain_loop_img_per_s, power (watts,
  joules_per_image, seconds, side, source [, power_limit_watts, idle_watts]; or not_measured,
  why), and
  mfu and compiled (recorded for people, kept as written).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import settings as declared
from .config import Config, ConfigError, load_recipe

SCHEMA = 2
READABLE_SCHEMAS = (1, 2)
WRITTEN_BY = "a profile is what `python -m submission bench ... json=FILE` writes"
# the settings the bench ran with that a profile records (submission/settings.py marks them),
# and those whose difference from the projected run's makes the measured rates doubtful
RECORDED_SETTINGS = ("system", *declared.profiled())
RATE_SETTINGS = tuple(declared.profiled(declared.COMPARED))
LOADER_KINDS = declared.admits("train_loader")
# the bench's per-image CPU work of the torchvision loader, each on one thread (ms per image)
AUGMENTATION_STAGES = ("decode", "crop_flip", "randaugment", "to_tensor", "total")


class ProfileError(ConfigError):
    """The profile is missing, unreadable or lacks a figure the projection needs."""


@dataclass(frozen=True)
class Measured:
    date: str | None = None
    host: str | None = None
    device: str | None = None
    device_name: str | None = None
    torch: str | None = None
    python: str | None = None
    steps: int | None = None
    rounds: int | None = None


@dataclass(frozen=True)
class SideStep:
    img_per_s: float
    first_step_s: float
    timed_steps: int | None = None
    sam_steps: int | None = None


@dataclass(frozen=True)
class Loader:
    kind: str
    img_per_s: float
    threads: int
    resolution: int | None = None
    epoch_start_s: float | None = None

    @property
    def img_per_s_per_thread(self) -> float:
        return self.img_per_s / self.threads


@dataclass(frozen=True)
class FedStep:
    """The step fed by the loader and the synthetic step, at one side."""
    fed_img_per_s: float
    synthetic_img_per_s: float
    in_turns: bool


@dataclass(frozen=True)
class SetupExtra:
    first_eval_extra: float
    in_run_first_epoch_extra: float | None = None


@dataclass(frozen=True)
class LoaderProbe:
    """The run's loaders in a fresh process after run_start."""
    train_first_batch_s: float
    val_first_pass_s: float
    warm_up_s: float | None = None
    build_s: float | None = None
    epoch_start_s: float | None = None


@dataclass(frozen=True)
class LoaderSetup:
    cold: LoaderProbe
    warm: LoaderProbe


@dataclass(frozen=True)
class LoopOverhead:
    normalize_resize_s: float
    ema_s: float
    side: int | None = None
    share_of_step: float | None = None


@dataclass(frozen=True)
class Augmentation:
    decode: float
    crop_flip: float
    randaugment: float
    to_tensor: float
    total: float
    images: int | None = None
    threads: int | None = None
    resolution: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class Power:
    """Energy counters read around the recipe step at full size (submission.energy): the
    process's device, or the CPU packages; or why they could not be read."""
    watts: float | None = None
    joules_per_image: float | None = None
    seconds: float | None = None
    side: int | None = None
    source: str | None = None
    power_limit_watts: float | None = None
    idle_watts: float | None = None            # the same counters with nothing running
    not_measured: str | None = None


@dataclass(frozen=True)
class BenchProfile:
    measured: Measured
    settings: dict[str, Any]
    train_step: dict[int, SideStep]
    eval_img_per_s: float
    loader: Loader
    fed_step_by_side: dict[int, FedStep]
    setup_s: SetupExtra | None = None
    loader_setup_s: LoaderSetup | None = None
    loop_overhead: LoopOverhead | None = None
    augmentation_ms_per_image: Augmentation | None = None
    eval_forward_img_per_s: float | None = None
    step_img_per_s: float | None = None
    plain_loop_img_per_s: float | None = None
    mfu: dict[str, Any] | None = None
    compiled: dict[str, Any] | None = None
    power: Power | None = None
    # the file it was read from: not a figure, not written
    file: str = field(default="", compare=False, metadata={"written": False})

    @property
    def sam_interval(self) -> int:
        return self.settings["sam_interval"]


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
    Path(path).write_text(json.dumps(to_json(profile), indent=1) + "\n")


# ---- checks ------------------------------------------------------------------
_ABSENT = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


Check = tuple[Callable[[Any], bool], str]
_OBJECT: Check = (lambda v: isinstance(v, dict), "an object")
_RATE: Check = (lambda v: _is_number(v) and v > 0, "a number of images per second > 0")
_COUNT: Check = (lambda v: _is_whole(v, 1), "a whole number >= 1")
_WHOLE: Check = (lambda v: _is_whole(v, 0), "a whole number >= 0")
_SECONDS: Check = (lambda v: _is_number(v) and v >= 0, "a number of seconds >= 0")
_NUMBER: Check = (_is_number, "a number")
_POSITIVE: Check = (lambda v: _is_number(v) and v > 0, "a number > 0")
_TEXT: Check = (lambda v: isinstance(v, str), "a text")
_BOOL: Check = (lambda v: isinstance(v, bool), "true or false")
_KIND: Check = (lambda v: v in LOADER_KINDS, "one of " + ", ".join(LOADER_KINDS))


def _at(data: dict[str, Any], name: str) -> Any:
    value: Any = data
    for key in name.split("."):
        value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
    return value


def _keys(data: dict[str, Any], name: str) -> list[str]:
    value = _at(data, name)
    return list(value) if isinstance(value, dict) else []


def _fields(data: dict[str, Any], schema: int) -> list[tuple[str, Check, bool]]:
    """(field, check, needed) of every field read, parents before their parts (a part of
    an absent optional field is not looked at); version 2 needs some that version 1 lacked."""
    v2 = schema == 2
    by_side = _at(data, "fed_step_by_side")
    fed_from_first_row = (not v2 and (by_side is _ABSENT or not by_side)
                          and _at(data, "fed_step_img_per_s") not in (_ABSENT, None)
                          and _at(data, "step_img_per_s") not in (_ABSENT, None))
    fields = [("measured", _OBJECT, True), ("settings", _OBJECT, True), ("train_step", _OBJECT, True),
              ("eval_img_per_s", _RATE, True), ("loader", _OBJECT, True),
              ("loader.img_per_s", _RATE, True), ("loader.threads", _COUNT, True),
              ("loader.kind", _KIND, v2), ("loader.resolution", _COUNT, False),
              ("loader.epoch_start_s", _SECONDS, False),
              ("settings.sam_interval", _WHOLE, v2), ("settings.batch_per_device", _COUNT, False),
              # the side a version-1 profile's one fed step was measured at
              ("settings.train_resolution", _COUNT, fed_from_first_row),
              ("fed_step_by_side", _OBJECT, v2), ("setup_s", _OBJECT, False),
              ("setup_s.first_eval_extra", _SECONDS, v2),
              ("setup_s.in_run_first_epoch_extra", _SECONDS, False),
              ("loader_setup_s", _OBJECT, False), ("loop_overhead", _OBJECT, False),
              ("loop_overhead.normalize_resize_s", _SECONDS, v2), ("loop_overhead.ema_s", _SECONDS, v2),
              ("loop_overhead.side", _COUNT, False), ("loop_overhead.share_of_step", _NUMBER, False),
              ("augmentation_ms_per_image", _OBJECT, False), ("eval_forward_img_per_s", _RATE, False),
              ("step_img_per_s", _RATE, False), ("plain_loop_img_per_s", _RATE, False),
              ("mfu", _OBJECT, False), ("compiled", _OBJECT, False), ("power", _OBJECT, False),
              ("power.watts", _POSITIVE, False), ("power.joules_per_image", _POSITIVE, False),
              ("power.seconds", _SECONDS, False), ("power.side", _COUNT, False),
              ("power.source", _TEXT, False), ("power.power_limit_watts", _POSITIVE, False),
              ("power.idle_watts", _POSITIVE, False), ("power.not_measured", _TEXT, False)]
    if not v2:
        fields.append(("fed_step_img_per_s", _RATE, False))
    return fields + _part_fields(data, v2)


def _part_fields(data: dict[str, Any], v2: bool) -> list[tuple[str, Check, bool]]:
    """(field, check, needed) of the parts of the fields that hold several."""
    fields = [(f"measured.{key}", _TEXT, False)
               for key in ("date", "host", "device", "device_name", "torch", "python")]
    fields += [(f"measured.{key}", _COUNT, False) for key in ("steps", "rounds")]
    fields += [(f"augmentation_ms_per_image.{key}", _SECONDS, True) for key in AUGMENTATION_STAGES]
    fields += [(f"augmentation_ms_per_image.{key}", check, False) for key, check in (
        ("images", _COUNT), ("threads", _COUNT), ("resolution", _COUNT), ("source", _TEXT))]
    for side in _keys(data, "train_step"):
        fields += [(f"train_step.{side}", _OBJECT, True), (f"train_step.{side}.img_per_s", _RATE, True),
                   (f"train_step.{side}.first_step_s", _SECONDS, v2),
                   (f"train_step.{side}.timed_steps", _COUNT, False),
                   (f"train_step.{side}.sam_steps", _WHOLE, False)]
    for probe in ("cold", "warm"):
        fields += [(f"loader_setup_s.{probe}", _OBJECT, True)]
        fields += [(f"loader_setup_s.{probe}.{key}", _SECONDS, key.endswith("first_batch_s")
                    or key.endswith("first_pass_s"))
                   for key in ("train_first_batch_s", "val_first_pass_s", "warm_up_s", "build_s",
                               "epoch_start_s")]
    for side in _keys(data, "fed_step_by_side"):
        fields += [(f"fed_step_by_side.{side}", _OBJECT, True),
                   (f"fed_step_by_side.{side}.fed_img_per_s", _RATE, True),
                   (f"fed_step_by_side.{side}.synthetic_img_per_s", _RATE, True),
                   (f"fed_step_by_side.{side}.in_turns", _BOOL, v2)]
    return fields


def problems(data: dict[str, Any], schema: int = SCHEMA) -> list[str]:
    """Each field of a profile of `schema` that is not of the type and range the bench
    writes, named."""
    found = [f"{name} side {side!r} is not a whole number of px"
             for name in ("train_step", "fed_step_by_side") for side in _keys(data, name)
             if not (side.isascii() and side.isdigit())]
    skip_below: list[str] = []      # fields reported, or optional and absent: not their parts
    for name, (ok, what), needed in _fields(data, schema):
        value = _at(data, name)
        if any(name.startswith(f"{parent}.") for parent in skip_below) or (
                not needed and value in (_ABSENT, None)):
            skip_below.append(name)
            continue
        if value is _ABSENT or not ok(value):
            skip_below.append(name)
            found.append(f"{name} is {'missing' if value is _ABSENT else json.dumps(value)}, not {what}")
    return found


# ---- the one upgrade -----------------------------------------------------------
def _recipe_file_setting(settings: dict[str, Any], key: str, default: Any) -> Any:
    """`key` of the recipe file the profile names, else `default`."""
    try:
        return load_recipe(settings["recipe"]).get(key, default) if settings.get("recipe") else default
    except ConfigError:
        return default


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A valid schema-1 profile in the version-2 layout, each figure it lacks filled in as
    the projection read its absence. `data` is left as it was."""
    v2 = {**copy.deepcopy(data), "schema": 2}
    settings, loader = v2["settings"], v2["loader"]
    # profiles before 2026-11-24 name the recipe only: SAM and the loader are its file's
    if "sam_interval" not in settings:
        settings["sam_interval"] = _recipe_file_setting(settings, "sam_interval", 0)
    settings["sam_interval"] = settings["sam_interval"] or 0
    if not loader.get("kind"):
        loader["kind"] = (settings["train_loader"] if "train_loader" in settings
                          else _recipe_file_setting(settings, "train_loader", "ffcv"))
    # profiles before 2026-11-23 hold the fed step at full size only, against the bench's
    # first row (timed a minute earlier, not in turns with it)
    fed, synthetic = v2.pop("fed_step_img_per_s", None), v2.get("step_img_per_s")
    if v2.get("fed_step_by_side"):
        v2["fed_step_by_side"] = {side: {**pair, "in_turns": True}
                                  for side, pair in v2["fed_step_by_side"].items()}
    else:
        v2["fed_step_by_side"] = ({str(settings["train_resolution"]): {
            "fed_img_per_s": fed, "synthetic_img_per_s": synthetic, "in_turns": False}}
            if fed and synthetic else {})
    for side in v2["train_step"].values():
        side["first_step_s"] = side.get("first_step_s") or 0.0
    # set-up figures and loop work not measured count nothing; an empty part is none
    setup, overhead = v2.get("setup_s"), v2.get("loop_overhead")
    v2["setup_s"] = {**setup, "first_eval_extra": setup.get("first_eval_extra") or 0.0} if setup else None
    v2["loop_overhead"] = ({**overhead, **{key: overhead.get(key) or 0.0
                                           for key in ("normalize_resize_s", "ema_s")}}
                           if overhead else None)
    return v2


# ---- reader --------------------------------------------------------------------
def _part(cls: type, data: dict[str, Any] | None) -> Any:
    """`cls` from its JSON object (fields it does not know are left out), None from null."""
    if data is None:
        return None
    return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


def _loader_setup(probes: dict[str, Any] | None) -> LoaderSetup | None:
    return None if probes is None else LoaderSetup(_part(LoaderProbe, probes["cold"]),
                                                   _part(LoaderProbe, probes["warm"]))


def _build(data: dict[str, Any], source: str) -> BenchProfile:
    """The typed profile of a valid version-2 layout."""
    return BenchProfile(
        measured=_part(Measured, data["measured"]), settings=dict(data["settings"]),
        train_step={int(side): _part(SideStep, v) for side, v in data["train_step"].items()},
        eval_img_per_s=data["eval_img_per_s"], loader=_part(Loader, data["loader"]),
        fed_step_by_side={int(side): _part(FedStep, v) for side, v in data["fed_step_by_side"].items()},
        setup_s=_part(SetupExtra, data.get("setup_s")),
        loader_setup_s=_loader_setup(data.get("loader_setup_s")),
        loop_overhead=_part(LoopOverhead, data.get("loop_overhead")),
        augmentation_ms_per_image=_part(Augmentation, data.get("augmentation_ms_per_image")),
        eval_forward_img_per_s=data.get("eval_forward_img_per_s"),
        step_img_per_s=data.get("step_img_per_s"), plain_loop_img_per_s=data.get("plain_loop_img_per_s"),
        mfu=data.get("mfu"), compiled=data.get("compiled"), power=_part(Power, data.get("power")),
        file=source)


def _json_kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return {list: "an array", str: "a string"}.get(type(value), "a number")


def _schema_problem(data: Any) -> str | None:
    """What keeps `data` from being a profile of a schema this module reads, in words."""
    if not isinstance(data, dict):
        return f"is JSON, but not a bench profile: it is {_json_kind(data)}, not an object; {WRITTEN_BY}"
    if data.get("schema") is None:
        return f"is JSON, but not a bench profile: it has no \"schema\" field; {WRITTEN_BY}"
    schema = data["schema"]
    if _is_whole(schema, 0) and schema > SCHEMA:
        return (f"is a schema-{schema} bench profile, newer than this harness reads (schema "
                f"{SCHEMA} and older), written by a later version of the harness: project it "
                "with that version, or measure again with this one")
    if not _is_whole(schema, 0) or schema not in READABLE_SCHEMAS:
        return (f"has \"schema\": {json.dumps(schema)}, which is no bench profile schema this "
                f"harness reads ({', '.join(map(str, READABLE_SCHEMAS))}); {WRITTEN_BY}")
    return None


def _error(option: str, source: str, wrong: str, remedy: str) -> ProfileError:
    return ProfileError(f"{option} {source} {wrong}" + (f"; {remedy}" if remedy else ""))


def parse(data: Any, source: str, option: str = "profile", remedy: str = "") -> BenchProfile:
    """The profile in `data` (JSON read from `source`), of any readable schema. A problem
    raises ProfileError naming the option, the file and each field wrong, then `remedy`."""
    wrong = _schema_problem(data)
    if wrong:
        raise _error(option, source, wrong, remedy)
    for schema in range(data["schema"], SCHEMA + 1):
        found = problems(data, schema)
        if found:
            raise _error(option, source, f"is not a bench profile the projection can use: "
                                         f"{'; '.join(found)}", remedy)
        if schema == 1:
            data = upgrade_v1(data)
    return _build(data, source)


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
