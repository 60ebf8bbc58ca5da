"""FFCV's pipelines compiled once per process, and, with a folder, once per campaign.

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

Each run of a campaign is a new process (torchrun), where that sharing starts empty.
`install(folder)` keeps the compiled code in `folder` as well (`DiskCache`; train.py
passes `<cache_dir>/numba`), so that only a campaign's first run compiles. numba's own
cache (cache=True) cannot hold these functions (docs/ffcv-notes.md): FFCV's decoders call
libffcv through ctypes pointers, whose addresses numba writes into the code ("Cannot cache
compiled function "decode" as it uses dynamic globals"), and it keys a closure by pickling
its cells, where a dispatcher pickles with a uuid drawn anew in every process. Here
libffcv's functions are called by their symbol's name instead (`_register_libffcv`: the
same C functions, the same signatures), and each function's key is content alone: its
bytecode, the hash of its source file, its closure's values (dispatchers by their
function, arrays by their bytes) and numba's options, with the versions of Python, numba,
llvmlite, NumPy and FFCV (and a hash of FFCV's files), numba's code-generation settings,
the CPU numba compiles for and this module's own source. A function whose closure holds
anything else, or whose code holds an address (numba's check, as for cache=True: the
decoders do when numba does not optimise, NUMBA_OPT=0), compiles in every process. FFCV's
import also compiles numba's typed dict (its IMAGE_MODES); install(folder) before FFCV's
first import gives those functions the cache too.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import pickle
import sys
import types
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..private_folder import make_private, refuse_untrusted
from . import ffcv_threads

if TYPE_CHECKING:       # for the annotations only: numba and FFCV are imported where they run
    from ctypes import _NamedFuncPointer

    from ffcv.pipeline.compiler import Compiler
    from numba import types as nb
    from numba.core import event
    from numba.core.codegen import JITCPUCodegen
    from numba.core.compiler import CompileResult
    from numba.core.cpu import CPUContext
    from numba.core.typing.templates import Signature

_compiled: dict = {}
_pinned: list = []          # objects keyed by id(): kept alive so that an id is never reused
_folder: list[Path] = []    # where compiled code is kept, once install(folder) has run
_loaded = [0]               # functions this process loaded from the folder


@functools.cache
def _file_digest(path: str) -> str:
    """sha256 of a file's bytes ("" for a file that cannot be read, e.g. "<string>")."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _code_key(code: types.CodeType) -> tuple:
    """A code object by content: its file's bytes, name, bytecode, constants, names."""
    return ("code", code.co_filename, _file_digest(code.co_filename), code.co_name,
            code.co_firstlineno, code.co_code, _const_key(code.co_consts), code.co_names,
            code.co_varnames)


def _const_key(const: object) -> tuple:
    """A constant of code by content, the same in every process (a frozenset's order is not)."""
    if isinstance(const, types.CodeType):
        return _code_key(const)
    if isinstance(const, tuple):
        return ("tuple",) + tuple(_const_key(item) for item in const)
    if isinstance(const, frozenset):
        return ("frozenset",) + tuple(sorted(repr(_const_key(item)) for item in const))
    return (type(const).__name__, repr(const))


def _value_key(value: object, by_identity: list) -> tuple:
    """`value` by content where it can be; any other object by its id, noted in by_identity."""
    from numba.core.dispatcher import Dispatcher
    if isinstance(value, Dispatcher):
        return ("dispatcher", _function_key(value.py_func, by_identity),
                tuple(sorted((k, repr(v)) for k, v in value.targetoptions.items())))
    if isinstance(value, types.FunctionType):
        return ("function", _function_key(value, by_identity))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (bool, int, float, str, bytes, type(None), np.generic)):
        return (type(value).__name__, repr(value))
    if isinstance(value, tuple):
        return ("tuple",) + tuple(_value_key(item, by_identity) for item in value)
    if isinstance(value, (type, types.BuiltinFunctionType)):
        return ("named", value.__module__, value.__qualname__)     # range, numba's prange
    _pinned.append(value)
    by_identity.append(value)
    return ("object", id(value))


def _function_key(function: types.FunctionType, by_identity: list) -> tuple:
    cells = tuple(_value_key(cell.cell_contents, by_identity) for cell in function.__closure__ or ())
    return (_code_key(function.__code__), cells, _value_key(function.__defaults__, by_identity),
            repr(getattr(function, "is_parallel", None)))


# numba's settings that change the code it generates (the CPU is in numba's magic_tuple)
_NUMBA_SETTINGS = ("OPT", "LOOP_VECTORIZE", "SLP_VECTORIZE", "BOUNDSCHECK", "DEBUGINFO_DEFAULT",
                   "ENABLE_AVX", "LLVM_REFPRUNE_PASS")


def _environment() -> tuple:
    """What compiled code depends on besides the function: versions, numba's settings (read
    anew: numba reads its environment variables again whenever it compiles)."""
    from numba.core import config
    config.reload_config()      # as numba's compiler does first
    return _versions() + tuple(repr(getattr(config, name)) for name in _NUMBA_SETTINGS)


@functools.cache
def _versions() -> tuple:
    from importlib.metadata import version

    import llvmlite
    import numba
    return (sys.version, numba.__version__, llvmlite.__version__, np.__version__, version("ffcv"),
            _file_digest(__file__), _ffcv_digest())


def _ffcv_digest() -> str:
    """sha256 over FFCV's installed files (its Python and libffcv), found without importing it
    (its import compiles): a patched FFCV is another."""
    from importlib.util import find_spec
    spec = find_spec("ffcv")
    assert spec is not None and spec.origin is not None, "FFCV is not installed"
    folder = Path(spec.origin).parent
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".so") and p.is_file())
    return hashlib.sha256("".join(f"{p.relative_to(folder)}:{_file_digest(str(p))}"
                                  for p in files).encode()).hexdigest()


class DiskCache:
    """numba's per-dispatcher cache (the part of `numba.core.caching.Cache` a Dispatcher
    calls), one file per function, signature and CPU: `<sha256 of the key>.nbc` in
    `folder`, holding the key's text (its length first) and then numba's reduced
    CompileResult, pickled: the key is read and compared before anything is unpickled, so
    that an entry of another function (or no entry of this harness) never is. A file is written
    whole under a unique name and moved into place, so that ranks writing the same entry
    at once leave one whole file; a file that does not load (truncated, corrupt, another
    key) is reported as a warning, compiled anew and rewritten; a folder that cannot be
    written is reported and the run goes on."""

    def __init__(self, folder: Path, key: tuple) -> None:
        self.folder, self.key, self.cache_path = folder, key, str(folder)

    def _entry(self, sig: Signature, codegen: JITCPUCodegen) -> tuple[Path, bytes]:
        key = repr((self.key, _environment(), codegen.magic_tuple(), str(sig))).encode()
        return self.folder / f"{hashlib.sha256(key).hexdigest()}.nbc", key

    def load_overload(self, sig: Signature, target_context: CPUContext) -> CompileResult | None:
        from numba.core.compiler import CompileResult
        target_context.refresh()
        path, key = self._entry(sig, target_context.codegen())
        refuse_untrusted(self.folder, "FFCV's compiled pipelines (numba)")
        try:
            payload = _payload_of(path.read_bytes(), key)
            compiled = CompileResult._rebuild(target_context, *pickle.loads(payload))
            _loaded[0] += 1
            return compiled
        except FileNotFoundError:
            return None
        except Exception as error:  # noqa: BLE001 - any damage (unpickling, numba's rebuild): compile
            warnings.warn(f"numba cache file {path} could not be loaded ({error!r}): "
                          "compiling instead, and writing it again", RuntimeWarning, stacklevel=2)
            return None

    # cres: numba's CompileResult, whose fields numba makes at run time, out of mypy's sight
    def save_overload(self, sig: Signature, cres: Any) -> None:
        from numba.core.serialize import dumps
        if cres.lifted or cres.library.has_dynamic_globals:
            return          # code that holds this process's addresses: numba would not cache it
        path, key = self._entry(sig, cres.library.codegen)
        temporary = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            make_private(self.folder)
            temporary.write_bytes(_ENTRY_MARK + len(key).to_bytes(8, "little") + key + dumps(cres._reduce()))
            os.replace(temporary, path)
        except OSError as error:
            with contextlib.suppress(OSError):
                temporary.unlink()
            warnings.warn(f"numba cache: could not write {path} ({error}); the next run compiles "
                          "this function again", RuntimeWarning, stacklevel=2)

    def flush(self) -> None:
        """numba's Cache.flush (called by Dispatcher.recompile): entries are keyed by
        content, so none goes stale here."""


_ENTRY_MARK = b"submission-nbc-2\n"     # an entry's first bytes: this layout


def _payload_of(entry: bytes, key: bytes) -> bytes:
    """The pickled part of `entry` when its stored key is `key`; a ValueError, before anything
    is unpickled, for an entry of another layout or another function."""
    head = len(_ENTRY_MARK) + 8
    if not entry.startswith(_ENTRY_MARK) or len(entry) < head:
        raise ValueError("it is not an entry of this harness's layout")
    length = int.from_bytes(entry[len(_ENTRY_MARK):head], "little")
    if entry[head:head + length] != key:
        raise ValueError("it holds another function's code")
    return entry[head + length:]


def keep_on_disk(dispatcher: object, folder: Path) -> bool:
    """Give `dispatcher` a DiskCache in `folder` if its function's key is content alone (else
    False: it compiles in every process). A function made per Loader also gets the key's
    digest in its qualified name, so that two different closures never link under one
    symbol name (numba names code by module, qualified name and a counter that starts
    again in every process)."""
    from numba.core.dispatcher import Dispatcher
    if not isinstance(dispatcher, Dispatcher):
        return False        # NUMBA_DISABLE_JIT
    by_identity: list = []
    key = (_value_key(dispatcher, by_identity),)
    if by_identity:
        return False
    function = dispatcher.py_func
    if "<locals>" in function.__qualname__:
        function.__qualname__ += f"<{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}>"
    dispatcher._cache = DiskCache(folder, key)  # type: ignore[attr-defined]  # numba's, untyped
    return True


# libffcv's C functions as numba ExternalFunctions, by name (set by _register_libffcv)
_resize: Any = None
_imdecode: Any = None
_memcpy: Any = None


def resize_crop(source: np.ndarray, start_row: int, end_row: int, start_col: int, end_col: int,
                destination: np.ndarray) -> None:
    """FFCV's libffcv.resize_crop, calling the C function by name."""
    _resize(0, source.ctypes.data, source.shape[0], source.shape[1], start_row, end_row,
            start_col, end_col, destination.ctypes.data, destination.shape[0], destination.shape[1])


def imdecode(source: np.ndarray, dst: np.ndarray, source_height: int, source_width: int,
             crop_height: int | None = None, crop_width: int | None = None, offset_x: int = 0, offset_y: int = 0,
             scale_factor_num: int = 1, scale_factor_denom: int = 1, enable_crop: bool = False,
             do_flip: bool = False) -> int:
    """FFCV's libffcv.imdecode, calling the C function by name."""
    return _imdecode(source.ctypes.data, source.size, source_height, source_width, dst.ctypes.data,
                     crop_height, crop_width, offset_x, offset_y, scale_factor_num, scale_factor_denom,
                     enable_crop, do_flip)


def memcpy(source: np.ndarray, dest: np.ndarray) -> int:
    """FFCV's libffcv.memcpy, calling the C function by name."""
    return _memcpy(source.ctypes.data, dest.ctypes.data, source.size * source.itemsize)


@functools.cache
def _register_libffcv() -> dict:
    """Register libffcv's functions with llvmlite under names of this module's own (numba
    writes a ctypes pointer's address into the code, a name it resolves when it loads the
    code); returns FFCV's helpers -> this module's. The signatures are FFCV 1.0.2's, checked
    against its ctypes declarations."""
    global _resize, _imdecode, _memcpy
    import llvmlite.binding
    from ffcv import libffcv
    from numba import types as nb
    from numba.core.typing.ctypes_utils import make_function_type

    def by_name(name: str, function: _NamedFuncPointer, signature: Signature) -> nb.ExternalFunction:
        if make_function_type(function).sig != signature:
            raise RuntimeError(f"FFCV's {function.__name__} is declared {make_function_type(function).sig}, "
                               f"not {signature} as in FFCV 1.0.2: update compile_cache for this FFCV")
        llvmlite.binding.add_symbol(name, ctypes.cast(function, ctypes.c_void_p).value)
        return nb.ExternalFunction(name, signature)

    u32 = nb.uint32
    _resize = by_name("submission_ffcv_resize", libffcv.ctypes_resize, nb.int32(*[nb.int64] * 11))
    _imdecode = by_name("submission_ffcv_imdecode", libffcv.ctypes_imdecode, nb.int32(
        nb.voidptr, nb.uint64, u32, u32, nb.voidptr, u32, u32, u32, u32, u32, u32, nb.boolean, nb.boolean))
    _memcpy = by_name("submission_ffcv_memcpy", libffcv.ctypes_memcopy, nb.int32(nb.voidptr, nb.voidptr, nb.uint64))
    return {libffcv.resize_crop: resize_crop, libffcv.imdecode: imdecode, libffcv.memcpy: memcpy}


def _typed_dict_on_disk(folder: Path) -> None:
    """numba's typed-dict functions (FFCV's import compiles them) kept in `folder`."""
    from numba.core.dispatcher import Dispatcher
    from numba.typed import typeddict
    for function in vars(typeddict).values():
        if isinstance(function, Dispatcher):
            keep_on_disk(function, folder)


@contextlib.contextmanager
def compilations() -> Iterator[Counted]:
    """Counts numba's compilations, in any thread, while the block runs (`.count`). No event
    is kept: the event of an attempt that raised holds its traceback, whose frames would keep
    a pipeline's buffers alive."""
    from numba.core import event

    class Counter(event.Listener):
        count = 0

        def on_start(self, happened: event.Event) -> None:
            self.count += 1

        def on_end(self, happened: event.Event) -> None:
            pass

    counter = Counter()
    with event.install_listener("numba:compile", counter):
        yield counter


class Counted(Protocol):
    """What compilations() yields: the compilations counted so far."""
    count: int


def on_disk() -> tuple[Path | None, int]:
    """The folder compiled code is kept in (None: this process keeps none) and how many
    functions this process has loaded from it."""
    return (_folder[0] if _folder else None), _loaded[0]


def install(folder: Path | None = None) -> None:
    """Route FFCV's Compiler.compile through the cache (idempotent); with `folder`, keep
    the compiled code there too, for the next process (call it before FFCV's first import:
    that import compiles numba's typed dict); a ConfigError when others could write it."""
    if folder is not None and _folder != [folder]:
        refuse_untrusted(folder, "FFCV's compiled pipelines (numba)")
        _folder[:] = [folder]
        _typed_dict_on_disk(folder)
    ffcv_threads.install()      # imports FFCV, keeping torch's thread count
    from ffcv.pipeline.compiler import Compiler
    if getattr(Compiler.compile, "_shared_across_loaders", False):
        return
    ffcv_compile = Compiler.compile.__func__

    def compile_once(cls: type[Compiler], code: types.FunctionType, signature: Signature | None = None) -> Callable:
        from numba.core import config
        # else FFCV runs the Python functions; numba's config sets DISABLE_JIT from the environment
        if cls.is_enabled and not config.DISABLE_JIT:  # type: ignore[attr-defined]
            code = _register_libffcv().get(code, code)
        made_per_loader = "<locals>" in getattr(code, "__qualname__", "")
        if not cls.is_enabled or not made_per_loader:
            return ffcv_compile(cls, code, signature)
        by_identity: list = []
        key = (_function_key(code, by_identity), str(signature), cls.num_threads)
        dispatcher = _compiled.get(key)
        if dispatcher is None:
            dispatcher = _compiled[key] = _compiled_lazily(ffcv_compile, cls, code, signature)
        return dispatcher

    compile_once._shared_across_loaders = True  # type: ignore[attr-defined]  # a mark: installed
    Compiler.compile = classmethod(compile_once)


def _compiled_lazily(ffcv_compile: Callable, cls: type[Compiler], code: types.FunctionType,
                     signature: Signature | None) -> Callable:
    """FFCV's dispatcher for `code`, given its DiskCache before it compiles: FFCV compiles
    a function with a signature at once, so it is made without one, then compiled for it
    as numba's jit decorator does."""
    from numba.core.dispatcher import Dispatcher
    dispatcher = ffcv_compile(cls, code)
    if not isinstance(dispatcher, Dispatcher):
        return dispatcher       # NUMBA_DISABLE_JIT: njit returned the Python function
    if _folder:
        keep_on_disk(dispatcher, _folder[0])
    if signature is not None:
        from numba.core import typeinfer
        with typeinfer.register_dispatcher(dispatcher):
            dispatcher.compile(signature)
        dispatcher.disable_compile()
    return dispatcher
