"""``hostcore run``'s loop and what it prints, for the click command and the lean path.

:func:`hostcore.cli.commands.run_command` (every form of ``run``) and
:mod:`hostcore.cli.lean` (``run --once`` with no option of the terminal's) both
call :func:`run_ticks`, which prints through the ``echo`` it is given. No click
here: the lean path never imports it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from hostcore.cli.failures import Echo
from hostcore.files import remove_stale_temps
from hostcore.host import Host
from hostcore.plugin.output import json_text
from hostcore.plugin.signals import stop_on_signals
from hostcore.steps import StdoutGuard
from hostcore.tick import TickReport, drain

# How long `run` waits for the host to close before it exits with a step abandoned:
# the abandoned code may hold a lock the close needs (seconds).
CLOSE_GRACE_SECONDS = 5.0


def run_ticks(host: Host, *, once: bool, as_json: bool, guard: StdoutGuard, quiet: bool,
              echo: Echo) -> None:
    """Run ``host``'s ticks as ``hostcore run`` (``--once``, ``--json``, ``-q``) does,
    printing through ``echo``; raises SystemExit(1) when a step failed."""
    host.activity = "hostcore run --once" if once else "hostcore run"
    remove_stale_temps(host.root)  # left by a run killed mid-write
    settings = host.config.settings.run
    stop = stop_on_signals()
    # -q keeps what went wrong (a failed or abandoned step) and drops the rest: the
    # progress line, each tick's summary, the start and stop notes.
    interactive = not as_json and not quiet and sys.stderr.isatty()
    show = _tick_printer(as_json, interactive, guard, quiet=quiet, echo=echo)

    def say(message: str) -> None:
        if not quiet:
            echo(message, err=True)

    if interactive:
        host.progress = lambda line: echo(f"\r\033[K{line}", err=True, nl=False)
    if once:
        # A cron run gives up (exit 1, naming the holder) rather than queue forever.
        host.lock_wait = settings.lock_wait_seconds
        with host.step_lock():
            pass  # fail fast, before any step, when another run holds the root
        reports = drain(host, settings.drain_seconds, stop, on_tick=show)
        if reports[-1].abandoned:
            _exit_abandoned(host, reports[-1], echo)
        if reports[-1].pending:
            say("hostcore: work is still pending; the next run goes on with it")
        if not all(r.ok for r in reports):
            raise SystemExit(1)
        return
    say(f"hostcore: running on {host.root} (Ctrl-C to stop)")
    report = host.run(stop, on_tick=show)
    if report is not None and report.abandoned:
        _exit_abandoned(host, report, echo)
    say("hostcore: stopped")
    if report is not None and not report.ok:
        raise SystemExit(1)


def _exit_abandoned(host: Host, report: TickReport, echo: Echo) -> NoReturn:
    """Say which steps of ``report`` were abandoned, close the host (within
    :data:`CLOSE_GRACE_SECONDS`) and end the process with 1.

    The abandoned step's code still runs, holding the step lock: only the end of
    the process stops it and drops the lock together (see :mod:`hostcore.steps`).
    ``os._exit``, because interpreter shutdown would wait for the threads that
    code started, or trip over a stream it holds.
    """
    names = ", ".join(repr(step.name) for step in report.abandoned)
    echo(f"hostcore: stopped with step {names} abandoned; the step lock goes with "
         "the process", err=True)
    closing = threading.Thread(target=host.close, name="hostcore-close", daemon=True)
    closing.start()
    closing.join(CLOSE_GRACE_SECONDS)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


def _tick_printer(as_json: bool, interactive: bool, guard: StdoutGuard, *, quiet: bool,
                  echo: Echo) -> Callable[[TickReport], None]:
    """Print each tick: one JSON line, or one line of text (over the progress line);
    under ``quiet`` only its failed steps (JSON is what the command reports: kept)."""

    def show(report: TickReport) -> None:
        if as_json:
            with guard.reports():
                echo(json_text({"ok": report.ok, "pending": report.pending,
                                "steps": report.steps, "duration_ms": report.duration_ms}))
            return
        if interactive:
            echo("\r\033[K", err=True, nl=False)  # clear the progress line
        for step in report.failed:
            echo(f"hostcore: step {step.name!r} failed: {step.error}", err=True)
        if not quiet:
            echo(report.summary(), err=True)

    return show
