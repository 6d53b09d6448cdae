"""What a command that failed prints and exits with, however it was run.

The click application (:func:`hostcore.cli.app.run_cli`) and the lean path of
``run --once`` and ``status --json`` (:mod:`hostcore.cli.lean`) end a failed
command the same way: one line on stderr naming what failed, and the exit status
of ``docs/cli.md`` (2 a bad configuration, 1 the rest). No click here: the lean
path never imports it.
"""

from __future__ import annotations

import logging
import sqlite3
import traceback
from collections.abc import Callable

from hostcore.errors import ConfigError, HostcoreError, PluginLoadError

log = logging.getLogger("hostcore.cli")

# How a failure is written: click.echo, or hostcore.plugin.output.echo.
Echo = Callable[..., None]


def exit_status(exc: BaseException, echo: Echo) -> int | None:
    """The exit status of a command ended by ``exc``, once what failed is on stderr;
    None for any other exception, which is a bug for the caller to raise."""
    if isinstance(exc, ConfigError):
        return _fail(echo, f"config error: {exc}", 2)
    if isinstance(exc, PluginLoadError):
        # Strict mode is asked for by whoever is developing a plugin: the traceback,
        # down to the plugin's own frame (the error it was raised from), is the point.
        # A refused declaration (an empty entry point name) ran no plugin code: its
        # one line says everything, and a trace of hostcore's own frames would only
        # hide it.
        echo(f"hostcore: {exc}", err=True)
        if (exc.__cause__ or exc.__context__) is not None:
            echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)
        return 1
    if isinstance(exc, HostcoreError):  # a held lock, an unusable store
        return _fail(echo, str(exc), 1)
    if isinstance(exc, sqlite3.DatabaseError):
        return _fail(echo, "a state database cannot be used: "
                           f"{str(exc) or type(exc).__name__}", 1)
    if isinstance(exc, OSError):  # a full disk, a permission, a folder where a file should be
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(echo, f"{where}{exc.strerror or type(exc).__name__}", 1)
    if isinstance(exc, SystemExit):
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return None


def _fail(echo: Echo, message: str, status: int) -> int:
    echo(f"hostcore: {message}", err=True)
    log.debug("traceback of the failure above", exc_info=True)
    return status
