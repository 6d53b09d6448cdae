"""``hostcore status --watch``: the status screen, refreshed in place.

It reads what :meth:`~hostcore.host.Host.status` reads (each component's own
counters and the last tick's report, ``last-tick.json``) on a read-only host,
every interval: never the step lock, never a write under the root, so it can run
beside ``hostcore run`` and never slows a tick.

On a terminal it draws on the alternate screen (cursor home, each line cleared to
its end, the rest of the screen cleared), as wide and as tall as the terminal is
at each redraw; a resize (SIGWINCH) redraws at once. SIGINT or SIGTERM leaves the
alternate screen and shows the cursor again (so does an error, on its way out),
and the command exits 0, as ``hostcore run`` does on a signal. Anywhere else (a
pipe, a log) it prints one block of plain lines per refresh.

A component whose ``status()`` raises is one ``error`` line, counted on top, as
on the one-shot screen (:meth:`~hostcore.host.Host.status` keeps it to itself).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from hostcore.cli.render import Paint, component_state, plain, status_lines
from hostcore.host import Host
from hostcore.plugin.cli import stop_on_signals
from hostcore.plugin.terminal import MIN_WIDTH, fit
from hostcore.steps import StdoutGuard
from hostcore.tick import TickReport, load_last

ENTER = "\x1b[?1049h\x1b[?25l"  # the alternate screen, cursor hidden
RESTORE = "\x1b[?25h\x1b[?1049l"  # cursor shown, the alternate screen left
HOME, CLEAR_LINE, CLEAR_REST = "\x1b[H", "\x1b[K", "\x1b[J"
DEFAULT_INTERVAL_SECONDS = 2.0
# How often a wait between refreshes looks whether the terminal was resized (s).
RESIZE_CHECK_SECONDS = 0.1


class Watch:
    """The ticks the view has seen since it started (the first screen's is not one).

    A plain class: dataclasses would cost every cold ``status`` its import."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.ticks_seen = 0
        self.refreshes = 0
        self.last_finished: float | None = None

    def saw(self, last: TickReport | None) -> None:
        finished = None if last is None else last.finished_at
        if self.refreshes and finished is not None and finished != self.last_finished:
            self.ticks_seen += 1
        self.last_finished = finished
        self.refreshes += 1


def headline(watch: Watch, report: Mapping[str, Any], last: TickReport | None,
             width: int) -> list[str]:
    """The live view's own lines: when it refreshed, and the counts a person
    watching a run looks for (ticks, rows in and out, backlog, failures)."""
    clock = time.strftime("%H:%M:%S", time.localtime())
    lines = [fit(f"hostcore status --watch: every {watch.interval:g} s, {clock} "
                 "(Ctrl-C to stop)", width)]
    errors = sum(component_state(entry) == "error"
                 for section in report["components"].values() for entry in section.values())
    if last is None:
        tick = "no tick yet"
    else:
        # Backlog: the workers whose last step said more work is ready now.
        backlog = ", ".join(s.name for s in last.steps if s.pending) or "none"
        tick = (f"rows in {last.count('ingest', 'rows'):,}, out "
                f"{last.count('export', 'rows'):,} | backlog: {backlog} | failed steps "
                f"{len(last.failed)}")
    lines.append(fit(f"ticks seen {watch.ticks_seen} | {tick} | errors {errors}", width))
    return lines


def frame(watch: Watch, host: Host, width: int, paint: Paint) -> list[str]:
    """One refresh's lines: the view's own, a blank line, the status screen."""
    with StdoutGuard():  # what plugins' status hooks print goes to stderr, not on screen
        report = host.status()
    last = load_last(host.root)
    watch.saw(last)
    return [*headline(watch, report, last, width), "", *status_lines(report, width, paint)]


def screen(lines: list[str], rows: int, width: int) -> list[str]:
    """``lines`` cut to ``rows``, the last row saying how many were left out."""
    if len(lines) <= rows:
        return lines
    keep = max(0, rows - 1)
    more = f"… {len(lines) - keep} more lines (a taller terminal shows them)"
    return [*lines[:keep], fit(more, width)]


def terminal_size(stream: IO[str]) -> os.terminal_size:
    """The terminal's size now (not ``COLUMNS``, which a resize leaves stale)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except OSError:
        return os.terminal_size((80, 24))
    return os.terminal_size((max(MIN_WIDTH, size.columns), max(1, size.lines)))


class Resized:
    """Whether SIGWINCH came since the last redraw.

    A plain flag, not an Event: setting an Event in the handler takes its lock,
    which the main thread may hold at that instant (clearing it), for ever."""

    def __init__(self) -> None:
        self.came = False

    def note(self, signum: int, frame: object) -> None:
        self.came = True


@contextmanager
def resize_signal() -> Iterator[Resized]:
    """A flag SIGWINCH raises, for the wait between refreshes to notice at once."""
    resized = Resized()
    previous = signal.signal(signal.SIGWINCH, resized.note)
    try:
        yield resized
    finally:
        signal.signal(signal.SIGWINCH, previous)


def wait(stop: threading.Event, resized: Resized, seconds: float) -> None:
    """Until ``seconds`` pass, a stop is asked for, or the terminal is resized."""
    deadline = time.monotonic() + seconds
    while not stop.is_set() and not resized.came:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        stop.wait(min(left, RESIZE_CHECK_SECONDS))


def watch_terminal(host: Host, interval: float, paint: Paint, out: IO[str]) -> None:
    """Redraw in place on ``out`` (a terminal) until a signal."""
    watch, stop = Watch(interval), stop_on_signals()
    with resize_signal() as resized:
        out.write(ENTER)
        try:
            while not stop.is_set():
                resized.came = False
                size = terminal_size(out)
                shown = screen(frame(watch, host, size.columns, paint), size.lines,
                               size.columns)
                out.write(HOME + f"{CLEAR_LINE}\r\n".join(shown) + CLEAR_LINE + CLEAR_REST)
                out.flush()
                wait(stop, resized, interval)
        finally:
            out.write(RESTORE)
            out.flush()


def watch_plain(host: Host, interval: float, width: Callable[[], int],
                echo: Callable[[str], None]) -> None:
    """One block of plain lines per refresh (no escape codes), a blank line between
    blocks, until a signal. ``width`` is asked at each refresh."""
    watch, stop = Watch(interval), stop_on_signals()
    while not stop.is_set():
        if watch.refreshes:
            echo("")
        for line in frame(watch, host, width(), plain):
            echo(line)
        stop.wait(interval)
