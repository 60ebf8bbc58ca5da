"""A folder the harness loads code from (numba's compiled pipelines in `<cache_dir>/numba`,
TorchInductor's in `<cache_dir>/inductor`): the user's own, or refused.

Whoever can write such a folder runs code as the user of the next run (a pickle planted
there is unpickled). So the folder and the one above it (cache_dir) must be owned by the
user (or root) and writable by no one else: no group or other write bit, except for the
user's private group (Debian's user groups, umask 002); each folder further up may be
writable by others only with the sticky bit (as /tmp), where no one else can move a
folder of the user's away. A folder the harness makes is made with mode 0700.
TorchInductor's own default (/tmp/torchinductor_<user>) and pip's cache are checked alike.
"""
from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from .errors import ConfigError

PRIVATE = 0o700
STRICT_LEVELS = 2       # the code's folder and the cache_dir above it
_WHAT_TO_DO = ("Give cache_dir= a folder of your own (e.g. cache_dir=$HOME/.cache/resnet-submission), "
               "or make it yours: chown it to you and chmod go-w (docs/trust.md)")


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, uid: int) -> bool:
    """Whether group `gid` is the user's own (named as the user, no other member)."""
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    user = _name_of(uid)
    return group.gr_name == user and set(group.gr_mem) <= {user}


def _strict_problem(folder: Path, info: os.stat_result, uid: int) -> str | None:
    if info.st_uid not in (uid, 0):
        return f"{folder} is owned by {_name_of(info.st_uid)}, not by {_name_of(uid)}"
    if info.st_mode & stat.S_IWOTH:
        return f"{folder} is writable by every user (mode {stat.S_IMODE(info.st_mode):o})"
    if info.st_mode & stat.S_IWGRP and not _private_group(info.st_gid, uid):
        return f"{folder} is writable by its group (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _ancestor_problem(folder: Path, info: os.stat_result, uid: int) -> str | None:
    if info.st_mode & stat.S_ISVTX:
        return None         # sticky (as /tmp): no one else may move a folder of the user's away
    if info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP
                                       and not _private_group(info.st_gid, uid)):
        return (f"{folder}, above it, is writable by others without the sticky bit "
                f"(mode {stat.S_IMODE(info.st_mode):o}): they could replace the folder")
    return None


def problem(folder: Path) -> str | None:
    """Why code loaded from `folder` could have been written by someone else, or None. A
    folder that is not there yet is fine (the harness makes it, 0700); those above it are
    checked as they are."""
    uid = os.geteuid()
    path = Path(os.path.abspath(folder))
    for level, current in enumerate([path, *path.parents]):
        try:
            info = current.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue        # nothing there to load code from
        except OSError as error:
            return f"{current} cannot be checked ({error.strerror})"
        check = _strict_problem if level < STRICT_LEVELS else _ancestor_problem
        found = check(current, info, uid)
        if found:
            return found
    return None


def refuse_untrusted(folder: Path, what: str) -> None:
    """A ConfigError, one line, when `folder` (where `what` is loaded from) is not the user's own."""
    found = problem(folder)
    if found:
        raise ConfigError(
            f"{what} would be loaded from {folder}, but {found}: anyone who can write there runs "
            f"code as you. {_WHAT_TO_DO}")


def make_private(folder: Path) -> Path:
    """`folder`, made (mode 0700) where missing, the folders above it as mkdir makes them."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=PRIVATE, exist_ok=True)
    return folder


def numba_folder(cache_dir: Path) -> Path:
    """Where a run keeps FFCV's compiled pipelines (loaders/compile_cache.py)."""
    return cache_dir / "numba"


def inductor_folder(cache_dir: Path) -> Path:
    """Where a compile=true run keeps TorchInductor's code (unless TORCHINDUCTOR_CACHE_DIR is set)."""
    return cache_dir / "inductor"


def cache_dir_problems(cache_dir: Path, compiled: bool) -> list[str]:
    """Why a run could load code under `cache_dir` that someone else wrote (preflight), in words."""
    folders = [numba_folder(cache_dir)] + ([inductor_folder(cache_dir)] if compiled else [])
    found = [problem(folder) for folder in folders]
    return [f"cache_dir: {text}; anyone who can write there runs code as you. {_WHAT_TO_DO}"
            for text in dict.fromkeys(f for f in found if f)]
