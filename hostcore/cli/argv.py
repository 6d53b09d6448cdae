"""The root options a lean path reads off the command line itself, without click,
and the form of every path's log lines.

:mod:`hostcore.cli.hook` and :mod:`hostcore.cli.lean` take a few exact forms of
the command line before the click application is built. Both read the same root
options here: ``--root R``, ``--config C`` (each also as ``--opt=value``) and
``-v``/``-vv``/``--verbose``. Anything else before the command's name is not
theirs: the caller then hands the whole line to click, which knows every option.

Standard library only: :mod:`hostcore.__main__` imports this for every command.
"""

from __future__ import annotations

import os

# Not typing's: typing would cost every hook run (mypy reads this constant as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Every path of the command line logs so: click's (hostcore.cli.app) and the lean
# ones (hostcore.cli.hook, hostcore.cli.lean).
LOG_FORMAT = "hostcore: %(levelname)s: %(message)s"


class RootOptions:
    """The root options given before a command's name, and the words after it."""

    __slots__ = ("command", "config", "rest", "root", "verbose")

    def __init__(self, root: str | None, config: str | None, verbose: int, command: str,
                 rest: list[str]) -> None:
        self.root = root
        self.config = config
        self.verbose = verbose
        self.command = command
        self.rest = rest


def split(args: list[str]) -> RootOptions | None:
    """``args`` as root options, a command's name and its words; ``None`` when a word
    before the name is no root option read here (or lacks its value), or there is
    no name."""
    root = config = None
    verbose = 0
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        name, equals, value = option.partition("=")
        if name in ("--root", "--config"):
            if not equals:
                if not rest:
                    return None
                value = rest.pop(0)
            if name == "--root":
                root = value
            else:
                config = value
        elif option in ("-v", "-vv", "--verbose"):
            verbose += 2 if option == "-vv" else 1
        else:
            return None
    if not rest:
        return None
    return RootOptions(root, config, verbose, rest[0], rest[1:])


# As hostcore.host.ENV_ROOT, which this module cannot import (it loads msgspec).
_ENV_ROOT = "HOSTCORE_ROOT"
# The words after ``run`` and ``status`` that hostcore.cli.lean runs, and whether
# each prints JSON.
_LEAN_FORMS = {
    ("run", ("--once",)): False,
    ("run", ("--once", "--json")): True,
    ("run", ("--json", "--once")): True,
    ("status", ("--json",)): True,
}


class LeanCommand:
    """A ``run --once`` or ``status --json`` for :mod:`hostcore.cli.lean` to run."""

    __slots__ = ("as_json", "config", "name", "root")

    def __init__(self, name: str, root: str | None, config: str | None,
                 as_json: bool) -> None:
        self.name = name
        self.root = root
        self.config = config
        self.as_json = as_json


def lean_command(args: list[str], env: Mapping[str, str]) -> LeanCommand | None:
    """The lean command ``args`` asks for, or ``None``: any other command or form, an
    option of the terminal's (``-v``, ``-q``, ``--color``), or an option value click
    refuses with its own message (a blank ``--root`` or ``$HOSTCORE_ROOT``, a
    ``--config`` that is a folder)."""
    found = split(args)
    if found is None or found.verbose:
        return None
    as_json = _LEAN_FORMS.get((found.command, tuple(found.rest)))
    if as_json is None:
        return None
    # click reads an empty $HOSTCORE_ROOT as unset (the host then refuses it), and
    # refuses a blank value itself.
    root = found.root if found.root is not None else env.get(_ENV_ROOT) or None
    if root is not None and not root.strip():
        return None
    if found.config is not None and (not found.config or os.path.isdir(found.config)):
        return None
    return LeanCommand(found.command, found.root, found.config, as_json)
