"""Stopping a loop on SIGINT and SIGTERM: between steps, never inside one.

Standard library only, and no click: the lean path of ``run --once``
(:mod:`hostcore.cli.lean`) uses it as the full command line does.
:mod:`hostcore.plugin.cli` offers it to plugins' commands.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

__all__ = ["stop_on_signals"]


def stop_on_signals() -> threading.Event:
    """An event SIGINT and SIGTERM set: loops check it between steps and stop cleanly.

    Call it from the main thread (where Python runs signal handlers); each call
    returns a new event, which the next signal sets. The handler only writes a
    byte to a pipe, and a watcher thread sets the event: setting it in the
    handler would take the event's lock, which the main thread may hold at that
    instant (inside ``stop.wait``) and would never get back, so the process
    would ignore every later SIGTERM.
    """
    global _signals
    if _signals is None or _signals.pid != os.getpid():  # none yet, or a forked child's
        _signals = _SignalPipe()
    stop = _signals.event = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _signals.note)
    return stop


class _SignalPipe:
    """One pipe and one watcher thread per process, for :func:`stop_on_signals`."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        threading.Thread(target=self._watch, name="hostcore-stop-on-signals",
                         daemon=True).start()

    def note(self, signum: int, frame: object) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe already holds a wake-up
            os.write(self._write, b"\0")

    def _watch(self) -> None:
        while True:
            os.read(self._read, 1)
            self.event.set()


_signals: _SignalPipe | None = None
