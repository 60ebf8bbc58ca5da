"""The bench profile: the rates `python -m submission bench ... json=FILE` measures on a
machine and `project`, `tradeoff` and `qualify` read, as one versioned type with its writer
and its reader.

Every field is declared once below, as settings and options are (`declare`, in
setting_declaration.py): its annotation says what its JSON value is (a part of its own, one
part per side), `admits` its range. The writer writes the dataclasses, the reader checks a
file against the same declarations and builds them. A field without a default is needed; an
optional one may be absent or null. A side is a whole number of px, written as a
string key. Schema 2 is written and read; the schema-1 files of 2026-11-22/23 were converted once (CHANGELOG.md).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, get_args

from . import settings as declared
from .config import Config, ConfigError
from .jsonfile import write_json
from .loader_kinds import TrainLoader
from .setting_declaration import ABOVE_0, AT_LEAST_0, AT_LEAST_1, Declaration, declarations, declare

SCHEMA = 2
WRITTEN_BY = "a profile is what `python -m submission bench ... json=FILE` writes"
# the settings the bench ran with that a profile records (submission/settings.py marks them),
# and those whose difference from the projected run's makes the measured rates doubtful
RECORDED_SETTINGS = ("system", *declared.profiled())
RATE_SETTINGS = tuple(declared.profiled(declared.COMPARED))
# the recorded settings the projection reads, each checked by its own declaration: whether needed
READ_SETTINGS = {"sam_interval": True, "batch_per_device": False, "train_resolution": False}
LOADER_KINDS = get_args(TrainLoader)
# the bench's per-image CPU work of the torchvision loader, each on one thread (ms per image)
AUGMENTATION_STAGES = ("decode", "crop_flip", "randaugment", "to_tensor", "total")


class ProfileError(ConfigError):
    """The profile is missing, unreadable or lacks a figure the projection needs."""


@dataclass(frozen=True)
class Measured:
    date: str | None = declare(default=None)
    host: str | None = declare(default=None)
    device: str | None = declare(default=None)
    device_name: str | None = declare(default=None)
    torch: str | None = declare(default=None)
    python: str | None = declare(default=None)
    pillow: str | None = declare(default=None)            # "Pillow 13.0.0", "Pillow-SIMD 12.1.1.post0"
    steps: int | None = declare(default=None, admits=AT_LEAST_1)
    rounds: int | None = declare(default=None, admits=AT_LEAST_1)


@dataclass(frozen=True)
class SideStep:
    img_per_s: float = declare(admits=ABOVE_0)
    first_step_s: float = declare(admits=AT_LEAST_0)
    timed_steps: int | None = declare(default=None, admits=AT_LEAST_1)
    sam_steps: int | None = declare(default=None, admits=AT_LEAST_0)


@dataclass(frozen=True)
class Loader:
    kind: TrainLoader = declare()
    img_per_s: float = declare(admits=ABOVE_0)
    threads: int = declare(admits=AT_LEAST_1)
    resolution: int | None = declare(default=None, admits=AT_LEAST_1)
    epoch_start_s: float | None = declare(default=None, admits=AT_LEAST_0)
    device_memory_bytes: int | None = declare(default=None, admits=AT_LEAST_0)  # its peak on a GPU (buffers, batches)
    # per batch of the loader alone (bench.timing.per_batch_costs): torch operations its device
    # work calls from Python and its augmentation's (the device loader's); seconds of its host
    # work (the device loader's compiled gather; FFCV's and torchvision's whole batch) and of the
    # device loader's device part (on a GPU the Python that queues it; on a CPU the work itself)
    torch_ops_per_batch: int | None = declare(default=None, admits=AT_LEAST_0)
    augmentation_ops_per_batch: int | None = declare(default=None, admits=AT_LEAST_0)
    host_s_per_batch: float | None = declare(default=None, admits=AT_LEAST_0)
    device_part_s_per_batch: float | None = declare(default=None, admits=AT_LEAST_0)

    @property
    def img_per_s_per_thread(self) -> float:
        return self.img_per_s / self.threads


@dataclass(frozen=True)
class ThreadsRate:
    """The loader alone at one thread count."""
    KEY_UNIT: ClassVar[str] = "threads"          # what its key counts (a side's is px)
    img_per_s: float = declare(admits=ABOVE_0)


@dataclass(frozen=True)
class LoaderSweep:
    """The run's train loader alone at each of a few thread counts (the bench's: 1, 2, 4, ... up
    to the CPUs its process could use), on the host that measured it: how its rate grows with
    its threads there, which `project` follows instead of scaling the rate per thread."""
    kind: TrainLoader = declare()
    cpus: int = declare(admits=AT_LEAST_1)      # the CPUs the bench's process could use
    by_threads: dict[int, ThreadsRate] = declare()
    resolution: int | None = declare(default=None, admits=AT_LEAST_1)

    @property
    def img_per_s(self) -> dict[int, float]:
        """img/s at each thread count measured, in order of the count."""
        return {threads: rate.img_per_s for threads, rate in sorted(self.by_threads.items()) if threads > 0}


@dataclass(frozen=True)
class FedStep:
    """The step fed by the loader and the synthetic step, at one side."""
    fed_img_per_s: float = declare(admits=ABOVE_0)
    synthetic_img_per_s: float = declare(admits=ABOVE_0)
    in_turns: bool = declare()


@dataclass(frozen=True)
class LoaderBeside:
    """Another loader measured in the same bench, beside the run's (`loader`): the device
    loader beside FFCV's or torchvision's, or the recipe's own beside the device loader."""
    loader: Loader = declare()
    fed_step_by_side: dict[int, FedStep] = declare()
    eval_img_per_s: float = declare(admits=ABOVE_0)
    # the compiled step (compile=true) fed by the loader, in turns with it on synthetic batches,
    # at the compiled rows' sides (full size, the smallest); absent: not compiled
    compiled_fed_step_by_side: dict[int, FedStep] | None = declare(default=None)


@dataclass(frozen=True)
class SetupExtra:
    first_eval_extra: float = declare(admits=AT_LEAST_0)
    in_run_first_epoch_extra: float | None = declare(default=None, admits=AT_LEAST_0)


@dataclass(frozen=True)
class LoaderProbe:
    """The run's loaders in a fresh process after run_start."""
    train_first_batch_s: float = declare(admits=AT_LEAST_0)
    val_first_pass_s: float = declare(admits=AT_LEAST_0)
    warm_up_s: float | None = declare(default=None, admits=AT_LEAST_0)
    build_s: float | None = declare(default=None, admits=AT_LEAST_0)
    epoch_start_s: float | None = declare(default=None, admits=AT_LEAST_0)


@dataclass(frozen=True)
class LoaderSetup:
    cold: LoaderProbe = declare()
    warm: LoaderProbe = declare()


@dataclass(frozen=True)
class LoopOverhead:
    normalize_resize_s: float = declare(admits=AT_LEAST_0)
    ema_s: float = declare(admits=AT_LEAST_0)
    side: int | None = declare(default=None, admits=AT_LEAST_1)
    share_of_step: float | None = declare(default=None)
    tracking_s: float | None = declare(default=None, admits=AT_LEAST_0)   # the trackers' work per step (tracker=)


@dataclass(frozen=True)
class Augmentation:
    decode: float = declare(admits=AT_LEAST_0)
    crop_flip: float = declare(admits=AT_LEAST_0)
    randaugment: float = declare(admits=AT_LEAST_0)
    to_tensor: float = declare(admits=AT_LEAST_0)
    total: float = declare(admits=AT_LEAST_0)
    images: int | None = declare(default=None, admits=AT_LEAST_1)
    threads: int | None = declare(default=None, admits=AT_LEAST_1)
    resolution: int | None = declare(default=None, admits=AT_LEAST_1)
    source: str | None = declare(default=None)
    augmentation: str | None = declare(default=None)      # what the `randaugment` stage ran (TrivialAugment too)


@dataclass(frozen=True)
class Power:
    """Energy counters read around the recipe step at full size (submission.energy): the
    process's device, or the CPU packages; or why they could not be read."""
    watts: float | None = declare(default=None, admits=ABOVE_0)
    joules_per_image: float | None = declare(default=None, admits=ABOVE_0)
    seconds: float | None = declare(default=None, admits=AT_LEAST_0)
    side: int | None = declare(default=None, admits=AT_LEAST_1)
    source: str | None = declare(default=None)
    power_limit_watts: float | None = declare(default=None, admits=ABOVE_0)
    idle_watts: float | None = declare(default=None, admits=ABOVE_0)      # the same counters with nothing running
    not_measured: str | None = declare(default=None)


@dataclass(frozen=True)
class BenchProfile:
    measured: Measured = declare()
    settings: dict[str, Any] = declare()    # RECORDED_SETTINGS; those of READ_SETTINGS checked
    train_step: dict[int, SideStep] = declare()
    eval_img_per_s: float = declare(admits=ABOVE_0)               # evaluation through the loader (second pass)
    loader: Loader = declare()
    fed_step_by_side: dict[int, FedStep] = declare()   # {}: none measured
    loader_sweep: LoaderSweep | None = declare(default=None)     # the loader alone at each thread count
    compiled_fed_step_by_side: dict[int, FedStep] | None = declare(default=None)    # as LoaderBeside's
    loader_beside: LoaderBeside | None = declare(default=None)
    setup_s: SetupExtra | None = declare(default=None)
    loader_setup_s: LoaderSetup | None = declare(default=None)
    loop_overhead: LoopOverhead | None = declare(default=None)
    augmentation_ms_per_image: Augmentation | None = declare(default=None)
    eval_forward_img_per_s: float | None = declare(default=None, admits=ABOVE_0)
    step_img_per_s: float | None = declare(default=None, admits=ABOVE_0)
    plain_loop_img_per_s: float | None = declare(default=None, admits=ABOVE_0)
    mfu: dict[str, Any] | None = declare(default=None)               # recorded for people
    compiled: dict[str, Any] | None = declare(default=None)          # recorded for people
    power: Power | None = declare(default=None)
    # the file it was read from: not declared, so not a figure and not written
    file: str = field(default="", compare=False)

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
        return {name: _json_part(getattr(value, name)) for name in declarations(type(value))
                if getattr(value, name) is not None}
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


def _part_problems(cls: type, data: dict[str, Any], prefix: str) -> list[str]:
    """Each field of `cls` in `data` that is not what its declaration checks, named."""
    found = []
    for name, figure in declarations(cls).items():
        shown, value = prefix + name, data.get(name, _ABSENT)
        if value in (_ABSENT, None) and figure.default is not MISSING:
            continue
        if value is _ABSENT or not figure.admitted(value):
            found.append(_wrong(shown, value, figure))
            continue
        if figure.part:
            found += _part_problems(figure.part, value, f"{shown}.")
        if figure.sides:
            found += _sides_problems(figure.sides, value, shown, getattr(figure.sides, "KEY_UNIT", "px"))
    return found


def _sides_problems(part: type, data: dict[str, Any], shown: str, unit: str) -> list[str]:
    """Each key of `data` (a part per side, or per thread count: `unit`) that is not a whole
    number, or whose part is wrong."""
    found = []
    for side, item in data.items():
        if not (side.isascii() and side.isdigit()):
            found.append(f"{shown} {'side' if unit == 'px' else 'key'} {side!r} is not a whole number of {unit}")
        elif not isinstance(item, dict):
            found.append(f"{shown}.{side} is {json.dumps(item)}, not an object")
        else:
            found += _part_problems(part, item, f"{shown}.{side}.")
    return found


def _wrong(shown: str, value: Any, declaration: Declaration) -> str:
    return f"{shown} is {'missing' if value is _ABSENT else json.dumps(value)}, not {declaration.what()}"


def _settings_problems(settings: Any) -> list[str]:
    """Each setting of READ_SETTINGS a profile's settings lack (where needed) or hold wrong."""
    if not isinstance(settings, dict):
        return []               # said by _part_problems
    found = []
    for name, needed in READ_SETTINGS.items():
        value, declared_setting = settings.get(name, _ABSENT), declared.DECLARED[name]
        if (value is _ABSENT and needed) or (value is not _ABSENT and not declared_setting.admitted(value)):
            found.append(_wrong(f"settings.{name}", value, declared_setting))
    return found


def problems(data: dict[str, Any]) -> list[str]:
    """Each field of a profile that is not of the type and range the bench writes, named."""
    return _part_problems(BenchProfile, data, "") + _settings_problems(data.get("settings"))


def _build(cls: type, data: dict[str, Any] | None) -> Any:
    """`cls` from its checked JSON object (fields it does not know are left out), None from null."""
    if data is None:
        return None
    values = {}
    for name, figure in declarations(cls).items():
        if name not in data:
            continue
        value = data[name]
        if figure.part:
            value = _build(figure.part, value)
        elif figure.sides:
            value = {int(side): _build(figure.sides, item) for side, item in value.items()}
        values[name] = value
    return cls(**values)


def _is_count(value: Any) -> bool:
    return Declaration(type=int, admits=AT_LEAST_0).admitted(value)


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
    if _is_count(schema) and schema > SCHEMA:
        return (f"is a schema-{schema} bench profile, newer than this harness reads (schema "
                f"{SCHEMA}), written by a later version of the harness: project it "
                "with that version, or measure again with this one")
    if schema == 1:
        return ("is a schema-1 bench profile (written before 2026-11-25), which this version no "
                "longer reads: measure it again (the bench command below), or convert it with a "
                "release before 2026-11-26 (it read and upgraded schema 1)")
    if not _is_count(schema) or schema != SCHEMA:
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
