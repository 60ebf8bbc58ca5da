"""submission/loaders/compile_cache.py on disk: numba's compiled code kept in a folder for the
next process (a campaign's next run), what loads from it, what never does, and what a
damaged or unwritable folder does. Small closures stand in for FFCV's pipeline functions
(made per call, values frozen in their closure), in this process: a new dispatcher of the
same function is what a new process makes."""
from __future__ import annotations

import enum
import io
import pickle

import numpy as np
import pytest
from numba import njit
from numba.core import codegen, config, event
from PIL import Image

from submission.errors import ConfigError
from submission.loaders import compile_cache
from submission.loaders.compile_cache import keep_on_disk

ONE = 1.0


def closure(scale: float):
    """A function made per call, as FFCV's generate_code makes them."""
    def scaled(x):
        return x * scale + 1
    return scaled


def compiles(function, *args) -> int:
    """numba's compilations while `function(*args)` runs."""
    with event.install_recorder("numba:compile") as recorded:
        function(*args)
    return sum(1 for _, e in recorded.buffer if e.is_start)


def kept(function, folder):
    dispatcher = njit(function)
    assert keep_on_disk(dispatcher, folder)
    return dispatcher


def test_a_new_dispatcher_of_the_same_closure_loads_its_code_and_compiles_nothing(tmp_path):
    first = kept(closure(2.0), tmp_path)
    assert compiles(first, ONE) > 0
    assert len(list(tmp_path.glob("*.nbc"))) == 1
    second = kept(closure(2.0), tmp_path)
    assert compiles(second, ONE) == 0
    assert sum(second.stats.cache_hits.values()) == 1
    assert second(ONE) == 3.0
    assert first.py_func.__qualname__ == second.py_func.__qualname__       # the key's digest in it
    assert first.py_func.__qualname__.startswith("closure.<locals>.scaled<")


@pytest.mark.parametrize("change", ["closure value", "numba's optimisation", "CPU", "versions"])
def test_what_changes_the_code_never_loads_an_earlier_entry(tmp_path, monkeypatch, change):
    """A changed pipeline value, numba setting, CPU, or version of Python, numba, llvmlite,
    NumPy, FFCV (or this module) is another entry: it compiles and adds a file."""
    assert compiles(kept(closure(2.0), tmp_path), ONE) > 0
    scale = 2.0
    if change == "closure value":
        scale = 3.0
    elif change == "numba's optimisation":
        monkeypatch.setenv("NUMBA_OPT", "1" if int(config.OPT) != 1 else "2")   # numba reads it anew
    elif change == "CPU":
        plain = codegen.JITCPUCodegen.magic_tuple
        monkeypatch.setattr(codegen.JITCPUCodegen, "magic_tuple",
                            lambda self: plain(self)[:1] + ("another-cpu",) + plain(self)[2:])
    else:
        monkeypatch.setattr(compile_cache, "_versions", lambda: ("another numba",))
    again = kept(closure(scale), tmp_path)
    assert compiles(again, ONE) > 0
    assert again(ONE) == scale + 1
    assert len(list(tmp_path.glob("*.nbc"))) == 2


class Scale(enum.Enum):
    TWO = 2.0


def test_a_closure_over_an_object_known_only_by_identity_is_not_kept(tmp_path):
    scale = Scale.TWO

    def scaled(x):
        return x * scale.value
    dispatcher = njit(scaled)
    assert not keep_on_disk(dispatcher, tmp_path)
    dispatcher(ONE)
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_or_foreign_entry_is_reported_compiled_again_and_rewritten(tmp_path):
    compiles(kept(closure(2.0), tmp_path), ONE)
    (entry,) = tmp_path.glob("*.nbc")
    entry.write_bytes(entry.read_bytes()[:1000])                 # a write cut short
    damaged = kept(closure(2.0), tmp_path)
    with pytest.warns(RuntimeWarning, match="could not be loaded.*compiling instead"):
        assert compiles(damaged, ONE) > 0
    assert damaged(ONE) == 3.0
    assert compiles(kept(closure(2.0), tmp_path), ONE) == 0     # written again, whole

    compiles(kept(closure(5.0), tmp_path), ONE)
    (other,) = set(tmp_path.glob("*.nbc")) - {entry}
    entry.write_bytes(other.read_bytes())                        # another function's code
    foreign = kept(closure(2.0), tmp_path)
    with pytest.warns(RuntimeWarning, match="another function's code"):
        assert compiles(foreign, ONE) > 0
    assert foreign(ONE) == 3.0


def test_a_folder_that_cannot_be_written_is_reported_and_the_function_runs(tmp_path):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    dispatcher = kept(closure(2.0), blocked / "numba")
    with pytest.warns(RuntimeWarning) as said:
        assert dispatcher(ONE) == 3.0
    reading, writing = (str(w.message) for w in said)
    assert "could not be loaded (NotADirectoryError" in reading
    assert "could not write" in writing and "the next run compiles this function again" in writing


def test_a_write_that_fails_midway_leaves_no_entry_and_no_temporary_file(tmp_path, monkeypatch):
    """Entries are written under a temporary name and moved into place: a reader, or a rank
    writing the same entry, never sees part of one."""
    def cut_short(self, data):
        with open(self, "wb") as file:
            file.write(data[:100])
        raise OSError("disk full")
    monkeypatch.setattr(type(tmp_path), "write_bytes", cut_short)
    dispatcher = kept(closure(2.0), tmp_path)
    with pytest.warns(RuntimeWarning, match="disk full"):
        dispatcher(ONE)
    assert list(tmp_path.iterdir()) == []


def test_libffcvs_functions_called_by_name_give_ffcvs_bytes():
    """FFCV's compiled helpers call libffcv through ctypes pointers (an address numba writes
    into the code); installed, Compiler.compile gives helpers calling the same C functions
    by name: the same decoded JPEG, crop resize and copy."""
    from ffcv import libffcv
    from ffcv.pipeline.compiler import Compiler
    compile_cache.install()
    rows, columns = np.indices((24, 20))
    pixels = np.stack([rows * 10, columns * 12, rows * 5 + columns * 4], axis=-1).astype(np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, "JPEG", quality=90)
    jpeg = np.frombuffer(encoded.getvalue(), dtype=np.uint8)

    def outputs(imdecode, resize_crop, memcpy):
        decoded, resized, copied = (np.zeros((24, 20, 3), np.uint8), np.zeros((8, 8, 3), np.uint8),
                                    np.zeros_like(jpeg))
        imdecode(jpeg, decoded, 24, 20, 24, 20, 0, 0, 1, 1, False, False)
        resize_crop(decoded, 2, 20, 3, 17, resized)
        memcpy(jpeg, copied)
        return decoded, resized, copied

    ffcvs = outputs(*(njit(f) for f in (libffcv.imdecode, libffcv.resize_crop, libffcv.memcpy)))
    by_name = outputs(*(Compiler.compile(f) for f in (libffcv.imdecode, libffcv.resize_crop, libffcv.memcpy)))
    assert not any(f.py_func.__module__.startswith("ffcv") for f in
                   (Compiler.compile(libffcv.imdecode), Compiler.compile(libffcv.memcpy)))
    assert np.abs(ffcvs[0].astype(int) - pixels).mean() < 3           # a real decode
    for ffcv_output, by_name_output in zip(ffcvs, by_name):
        assert np.array_equal(ffcv_output, by_name_output)
    assert np.array_equal(by_name[2], jpeg)


class Planted:
    """A pickle that would create `marker` when unpickled: code someone else left in the cache."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_pickle_in_a_folder_others_can_write_is_refused_and_never_runs(tmp_path):
    folder = tmp_path / "numba"
    compiles(kept(closure(2.0), folder), ONE)
    (entry,) = folder.glob("*.nbc")
    marker = tmp_path / "planted-code-ran"
    entry.write_bytes(pickle.dumps(Planted(marker)))
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by every user"):
        kept(closure(2.0), folder)(ONE)
    with pytest.raises(ConfigError, match="writable by every user.*cache_dir="):
        compile_cache.install(folder)
    assert not marker.exists()


def test_an_entry_whose_key_does_not_match_is_never_unpickled(tmp_path):
    """The key beside the payload is read and compared first: an entry of another layout, or
    of another function, is compiled anew without unpickling anything of it."""
    compiles(kept(closure(2.0), tmp_path), ONE)
    (entry,) = tmp_path.glob("*.nbc")
    marker = tmp_path / "planted-code-ran"
    entry.write_bytes(pickle.dumps(Planted(marker)))             # no key at all: a bare pickle
    with pytest.warns(RuntimeWarning, match="could not be loaded"):
        assert kept(closure(2.0), tmp_path)(ONE) == 3.0
    assert not marker.exists()
    foreign_key = b"another function"
    entry.write_bytes(compile_cache._ENTRY_MARK + len(foreign_key).to_bytes(8, "little") + foreign_key
                      + pickle.dumps(Planted(marker)))
    with pytest.warns(RuntimeWarning, match="another function's code"):
        assert kept(closure(2.0), tmp_path)(ONE) == 3.0
    assert not marker.exists()
