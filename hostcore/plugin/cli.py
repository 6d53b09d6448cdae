"""What a plugin's CLI command needs from the host: the Host, JSON output, tables, signals.

A plugin adds commands in its ``hostcore_commands(cli)`` hookimpl; each command
gets the :class:`~hostcore.host.Host` it runs against through :func:`pass_host`,
and prints through :func:`emit_json` / :func:`print_table` so every command's
output looks alike::

    from hostcore.plugin.cli import emit_json, json_option, pass_host

    @hookimpl
    def hostcore_commands(cli):
        @cli.command("notes")
        @json_option
        @pass_host
        def notes(host, as_json):
            \"\"\"Show how many notes were ingested.\"\"\"
            emit_json({"notes": 3}) if as_json else click.echo("3 notes")

The Host is built on first use, so ``--help`` works even with a bad config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import update_wrapper
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import click

from hostcore.host import Host
from hostcore.plugin.output import json_text
from hostcore.plugin.signals import stop_on_signals
from hostcore.steps import StdoutGuard

if TYPE_CHECKING:
    from hostcore.plugin.loader import PluginSet

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["HostFactory", "emit_json", "emit_json_line", "json_option", "pass_host",
           "print_table", "stop_on_signals"]


class HostFactory:
    """Builds the Host on first use, so ``--help`` works even with a bad config.

    A command that only reads (``status``, ``plugins``, ``config``) asks for a
    read-only host, which creates nothing under the root.
    """

    def __init__(self, plugin_set: PluginSet, env: Mapping[str, str]) -> None:
        self.plugin_set = plugin_set
        self.env = env
        self.root: Path | None = None
        self.config: Path | None = None
        self._host: Host | None = None

    def get(self, *, read_only: bool = False) -> Host:
        if self._host is None:
            # What plugins print while they register goes to stderr: stdout is the
            # command's (--json above all).
            with StdoutGuard():
                self._host = Host(root=self.root, config=self.config, env=self.env,
                                  plugin_set=self.plugin_set, read_only=read_only)
        return self._host

    def close(self) -> None:
        if self._host is not None:
            self._host.close()


@overload
def pass_host(f: F, /) -> F: ...


@overload
def pass_host(*, read_only: bool = False, guard_stdout: bool = False) -> Callable[[F], F]: ...


def pass_host(f: F | None = None, /, *, read_only: bool = False,
              guard_stdout: bool = False) -> F | Callable[[F], F]:
    """Decorate a click command to receive the :class:`~hostcore.host.Host` first.

    ``@pass_host(read_only=True)`` for a command that only reports: its host
    opens the state read-only and creates no file or folder.

    ``guard_stdout=True`` for a command whose plugin code runs on step threads
    (``export``, ``poll``): what plugins print while the host is built, on those
    threads or from a child process goes to stderr (:class:`~hostcore.steps.StdoutGuard`),
    so the command's own report, ``--json`` above all, is all its stdout carries.
    """

    def decorate(command: F) -> F:
        @click.pass_context
        def wrapper(ctx: click.Context, /, *args: Any, **kwargs: Any) -> Any:
            factory = ctx.find_object(HostFactory)
            if factory is None:
                raise click.UsageError("this command must run under the hostcore CLI")
            if not guard_stdout:
                return ctx.invoke(command, factory.get(read_only=read_only), *args, **kwargs)
            with StdoutGuard() as guard:
                host = factory.get(read_only=read_only)
                with guard.reports():
                    return ctx.invoke(command, host, *args, **kwargs)

        return cast(F, update_wrapper(wrapper, command))

    return decorate if f is None else decorate(f)


def json_option(f: F) -> F:
    """Add ``--json`` (passed to the command as ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print machine-readable JSON (stable keys) instead of text.")(f)


def emit_json(data: Any) -> None:
    """Print ``data`` (Structs, dicts, lists) as indented JSON with sorted keys; text
    outside ASCII is escaped (``\\u00e9``), so any terminal encoding can print it."""
    click.echo(json_text(data, indent=2))


def emit_json_line(data: Any) -> None:
    """Print ``data`` as one line of JSON (JSON Lines, for streams of reports), keys
    sorted; text outside ASCII is escaped, as by :func:`emit_json`."""
    click.echo(json_text(data))


def print_table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    """A plain, aligned text table."""
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
