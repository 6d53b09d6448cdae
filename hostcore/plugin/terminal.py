"""How a command talks to the person at the terminal: quiet, colour, width.

The root command's ``-q/--quiet`` and ``--color`` are parsed once and kept on the
root click context (:func:`configure`); every command, the host's or a plugin's,
reads them through the functions here, so ``NO_COLOR``, ``--color`` and
``COLUMNS`` mean the same thing everywhere. Outside the CLI (a test invoking a
command directly) the defaults apply: not quiet, colour only on a terminal.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any, Literal, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
ColorChoice = Literal["auto", "always", "never"]
COLOR_CHOICES: tuple[ColorChoice, ...] = ("auto", "always", "never")
# The width used when neither COLUMNS nor the terminal says (a pipe, a CI log).
DEFAULT_WIDTH = 100
# Below this a table's columns cannot be told apart: a narrower COLUMNS is raised to it.
MIN_WIDTH = 40
_KEY = "hostcore.terminal"
# The states a person scans for: what failed reads red, what is merely off yellow.
_STATE_COLORS = {"failed": "red", "error": "red", "unavailable": "yellow",
                 "blocked": "yellow", "refused": "red", "ok": "green"}


class Terminal:
    """The output settings of one CLI invocation."""

    def __init__(self, *, quiet: bool = False, verbose: int = 0, color: ColorChoice = "auto",
                 env: Mapping[str, str] | None = None) -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.color = color
        self.env = dict(env or {})

    def more(self, count: int) -> None:
        """Add ``count`` ``-v`` given after a command name: ``-v`` means the same
        (more output: INFO logs, and what a listing adds) wherever it goes."""
        self.verbose += count
        self.apply_log_level()

    def apply_log_level(self) -> None:
        """WARNING by default, INFO at ``-v``, DEBUG at ``-vv``, ERROR under ``-q``."""
        level = logging.ERROR if self.quiet else \
            [logging.WARNING, logging.INFO, logging.DEBUG][min(self.verbose, 2)]
        logging.getLogger().setLevel(level)

    def colors(self, stream: IO[str] | None = None) -> bool:
        """Whether to colour what goes to ``stream`` (stdout by default).

        ``--color always|never`` decides; ``auto`` colours a terminal unless
        ``NO_COLOR`` is set to anything non-empty (https://no-color.org)."""
        if self.color != "auto":
            return self.color == "always"
        if self.env.get("NO_COLOR"):
            return False
        return (stream if stream is not None else sys.stdout).isatty()

    def width(self) -> int:
        """The columns output must fit: ``COLUMNS`` if it is a number, else the
        terminal's, else :data:`DEFAULT_WIDTH`."""
        columns = self.env.get("COLUMNS", "").strip()
        if columns.isdigit() and int(columns) > 0:
            return max(MIN_WIDTH, int(columns))
        # os's, not shutil's (which does only this past COLUMNS): shutil imports the
        # compression modules, a cost on every command's start (benchmarks/startup.py).
        try:
            size = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            size = 0  # no terminal: stdout is a pipe, a file, or closed
        return max(MIN_WIDTH, size or DEFAULT_WIDTH)


def configure(ctx: click.Context, terminal: Terminal) -> None:
    """Keep ``terminal`` for every command run under ``ctx``'s root."""
    ctx.find_root().meta[_KEY] = terminal


def current() -> Terminal:
    """The settings of the command running now (defaults outside the CLI)."""
    ctx = click.get_current_context(silent=True)
    found = None if ctx is None else ctx.find_root().meta.get(_KEY)
    return found if isinstance(found, Terminal) else Terminal()


def verbose_option(f: F) -> F:
    """Add ``-v/--verbose`` after a command's name, meaning what it means before it."""

    def more(ctx: click.Context, param: click.Parameter, count: int) -> int:
        current().more(count)
        return count

    return click.option("-v", "--verbose", "verbose", count=True, expose_value=False,
                        callback=more, help="More output, as before the command's name "
                                            "(-vv: DEBUG logs).")(f)


def fit(line: str, width: int) -> str:
    """``line`` cut to ``width`` columns, ending in an ellipsis when cut."""
    return line if len(line) <= width else line[:max(0, width - 1)] + "…"


def paint(text: str, state: str, *, stream: IO[str] | None = None) -> str:
    """``text`` coloured for ``state`` (``failed``, ``unavailable``, ``ok``...)
    when the current settings colour ``stream``; as it is otherwise."""
    color = _STATE_COLORS.get(state)
    if color is None or not current().colors(stream):
        return text
    return click.style(text, fg=color, bold=state in ("failed", "error", "refused"))


def say(message: str, *, err: bool = False) -> None:
    """A confirmation or note for the person, which ``-q`` silences."""
    if not current().quiet:
        click.echo(message, err=err)


def warn(message: str) -> None:
    """A warning on stderr (``hostcore: warning: ...``), which ``-q`` silences too."""
    say(f"hostcore: warning: {message}", err=True)


def refuse(message: str, fix: str) -> NoReturn:
    """End the command with exit 2: ``message``, and the flag or command that fixes it.

    Never silenced: the command did not do what it was told."""
    click.echo(f"hostcore: {message}; {fix}", err=True)
    raise SystemExit(2)
