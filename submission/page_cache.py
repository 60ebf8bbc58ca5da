"""cache_clear_cmd, the command MLPerf runs before each run to drop the page cache: its
words, run without a shell.

It comes from the system descriptor or the command line only (a grid file may not set it:
tradeoff/grid.py). It is split as a shell would split it (`shlex.split`: quotes keep a
word whole) and run as that program with those arguments; nothing is expanded. A command
that needs a shell (`;`, `&&`, a pipe, a redirection, `$`, a glob) is refused before
anything runs: MLPerf's `sync; echo 3 > /proc/sys/vm/drop_caches` is
`sysctl -w vm.drop_caches=3` (the default, as the published runs logged it), and anything
longer belongs in a script of the user's, named by its path.
"""
from __future__ import annotations

import shlex

from .errors import ConfigError

# what a shell would act on outside quotes, and inside double quotes
_UNQUOTED = (";", "&&", "||", "&", "|", ">", "<", "$", "`", "(", ")", "*", "?", "[", "~", "\n")
_DOUBLE_QUOTED = ("$", "`")


def _shell_syntax(command: str) -> str | None:
    """The first piece of shell syntax in `command` outside single quotes, or None."""
    quote, index = "", 0
    while index < len(command):
        char = command[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote = char
        else:
            found = next((s for s in (_DOUBLE_QUOTED if quote == '"' else () if quote else _UNQUOTED)
                          if command.startswith(s, index)), None)
            if found:
                return found.replace("\n", "a new line")
        index += 1
    return None


def problem(command: str) -> str | None:
    """Why `command` cannot run without a shell, in one line, or None."""
    syntax = _shell_syntax(command)
    if syntax is None:
        try:
            shlex.split(command)
            return None
        except ValueError as error:
            return f"cache_clear_cmd `{command}` cannot be split into words ({error})"
    return (f"cache_clear_cmd `{command}` needs a shell (`{syntax}`), and it is run without one: "
            "give one program and its arguments, e.g. cache_clear_cmd=sysctl -w vm.drop_caches=3 "
            "(what MLPerf's `sync; echo 3 > /proc/sys/vm/drop_caches` does), or a script of yours "
            "by its path; cache_clear_cmd= skips it")


def words(command: str) -> list[str]:
    """`command` as a program and its arguments; a ConfigError where it needs a shell."""
    found = problem(command)
    if found:
        raise ConfigError(found)
    return shlex.split(command)
