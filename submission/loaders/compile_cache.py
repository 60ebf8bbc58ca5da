"""FFCV pipelines compiled once per process, not once per Loader.

FFCV 1.0.2 builds every Loader's pipeline from closures made in each operation's
`generate_code` and wraps each in a new numba dispatcher (`Compiler.compile`), so a
second Loader with the same pipeline compiles it all again, and the first batch of a
run's training loader waits for it (docs/timing-and-warmup.md). That compilation would
land after run_start, because a Loader may only be built on the real data there.

`install()` makes `Compiler.compile` return the dispatcher it already made for the
same function: same code, same values frozen in its closure (numba compiles closure
variables as constants), same signature and thread count. A Loader on a synthetic
file before run_start then compiles what the real Loaders run (`warmup.warm_up_loaders`).
Values that cannot be compared by content (any other object) are keyed by identity,
so they never match a different object: a miss compiles, as FFCV would. Only the
functions FFCV makes per Loader (defined inside generate_code or compile_reader) are
shared; module-level helpers (imdecode, resize_crop) are left to FFCV: sharing their
dispatchers between callers compiled in parallel mode made numba fail with a KeyError
in type inference. They are compiled as part of the shared callers anyway.
"""
from __future__ import annotations

import types

import numpy as np

_compiled: dict = {}
_pinned: list = []          # objects keyed by id(): kept alive so that an id is never reused


def _value_key(value):
    from numba.core.dispatcher import Dispatcher
    if isinstance(value, Dispatcher):
        return ("dispatcher", _function_key(value.py_func))
    if isinstance(value, types.FunctionType):
        return ("function", _function_key(value))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (bool, int, float, str, bytes, type(None), np.generic)):
        return (type(value).__name__, value)
    if isinstance(value, tuple):
        return ("tuple",) + tuple(_value_key(item) for item in value)
    _pinned.append(value)
    return ("object", id(value))


def _function_key(function) -> tuple:
    cells = tuple(_value_key(cell.cell_contents) for cell in function.__closure__ or ())
    return (function.__code__, cells, _value_key(function.__defaults__),
            getattr(function, "is_parallel", None))


def install() -> None:
    """Route FFCV's Compiler.compile through the cache (idempotent)."""
    from ffcv.pipeline.compiler import Compiler
    if getattr(Compiler.compile, "_shared_across_loaders", False):
        return
    ffcv_compile = Compiler.compile.__func__

    def compile_once(cls, code, signature=None):
        made_per_loader = "<locals>" in getattr(code, "__qualname__", "")
        if not cls.is_enabled or not made_per_loader:
            return ffcv_compile(cls, code, signature)
        key = (_function_key(code), str(signature), cls.num_threads)
        dispatcher = _compiled.get(key)
        if dispatcher is None:
            dispatcher = _compiled[key] = ffcv_compile(cls, code, signature)
        return dispatcher

    compile_once._shared_across_loaders = True  # type: ignore[attr-defined]  # a mark: installed
    Compiler.compile = classmethod(compile_once)
