"""What leaves this machine (a package's configs/<system>.json, a tracker's config: W&B's,
a tradeoff point's TensorBoard HParams) names no local path or host: each setting keeps its
name, and its value is made relative to the repository, or redacted.

An absolute path, anywhere in a value (`/usr/local/sbin/drop --all`, an origin such as
`grid /home/me/grid.yaml`), is made relative where it lies inside the repository and is
`<redacted: local path>` elsewhere; a setting declared to name a machine (`names=HOST`:
master_addr) is `<redacted: host>` unless it is this machine's loopback.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import settings as declared

LOCAL_PATH = "<redacted: local path>"
HOST = "<redacted: host>"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "")
REPO_ROOT = Path(__file__).resolve().parent.parent
# an absolute path: at the start of the text, or after a space, '=' or a quote (key=/x); not
# a URL's (https://...)
_ABSOLUTE = re.compile(r"(?:^|(?<=[\s='\"]))~?/[^\s'\",;]*")


def _relative_or_redacted(match: re.Match[str], root: Path) -> str:
    path = Path(match[0]).expanduser()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else LOCAL_PATH


def redacted(value: Any, root: Path = REPO_ROOT) -> Any:
    """`value` (text, or JSON-like lists and mappings of it) with each absolute path made
    relative to `root` or redacted; keys are kept."""
    if isinstance(value, str):
        return _ABSOLUTE.sub(lambda match: _relative_or_redacted(match, root), value)
    if isinstance(value, dict):
        return {key: redacted(item, root) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(item, root) for item in value]
    return value


def redacted_settings(settings: dict[str, Any], root: Path = REPO_ROOT) -> dict[str, Any]:
    """Settings by name, their paths relative or redacted, a host they name redacted."""
    return {name: HOST if declared.names_a_host(name) and str(value).strip() not in LOOPBACK
            else redacted(value, root) for name, value in settings.items()}


def redacted_record(record: dict[str, Any], root: Path = REPO_ROOT) -> dict[str, Any]:
    """A campaign record (campaign.json) as a package holds it: its configuration's settings
    by redacted_settings, everything else by redacted."""
    shown = redacted(record, root)
    settings = (record.get("config") or {}).get("settings")
    if isinstance(settings, dict):
        shown["config"]["settings"] = redacted_settings(settings, root)
    return shown
