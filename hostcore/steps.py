"""One step of a tick, supervised: run on a thread of its own, under a deadline.

Plugin code can hang, ignore a stop request, call ``sys.exit`` or print. The
thread that runs the loop must stay free to notice a signal or a deadline, so
every step runs on a daemon thread of its own while that thread watches it:

- a step past its deadline (a worker's ``deadline_seconds``, else
  :data:`STEP_DEADLINE_SECONDS`), or still running :data:`STOP_GRACE_SECONDS`
  after a stop request, is *abandoned*: reported failed by name and left
  running on its thread;
- any ``BaseException`` a step raises (``SystemExit``, ``KeyboardInterrupt``)
  ends that step only, as a failure: on a thread of its own it could not end the
  process anyway, and must not read as a clean return.

The step lock is taken on the step's own thread and held there until the step's
code returns, abandoned or not: it is never released while the code it guards
may still write. The loop skips every later step while an abandoned one still
runs (they would wait for the lock it holds), and ``hostcore run`` exits after
reporting it, which drops the lock (a kernel ``flock``) and ends the thread
together. That is as safe as a SIGKILL mid-step, which every state write
survives by design. A step given up on while it still waited for the lock never
runs: it lets the lock go as soon as it gets it.

:class:`StdoutGuard` keeps what plugin code prints off hostcore's own output
(``run --json``), for the CLI.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Literal, TextIO

from hostcore.errors import HostcoreError

# How long a step may run when its worker declares no ``deadline_seconds``.
STEP_DEADLINE_SECONDS = 600.0
# How long a step may go on after a stop request (SIGTERM, SIGINT) before it is
# abandoned: a step that checks ``host.stop`` ends well within it.
STOP_GRACE_SECONDS = 5.0
# How often the loop's thread looks at the clock and the stop request while a step
# runs (seconds); a step that returns is noticed at once.
WATCH_SECONDS = 0.05

Ending = Literal["returned", "abandoned", "never_started"]


class StepAbandoned(HostcoreError):
    """A step was left running on its thread: past its deadline, or still running
    the grace period after a stop request. The message says which, in seconds."""


class Supervised:
    """How one supervised call ended.

    ``ending`` is ``"returned"`` (``result`` or ``error`` holds what it gave),
    ``"abandoned"`` (``error`` is a :class:`StepAbandoned`) or
    ``"never_started"`` (a stop request came while it waited for its lock; its
    code never ran).
    """

    def __init__(self, ending: Ending, result: object = None,
                 error: BaseException | None = None) -> None:
        self.ending = ending
        self.result = result
        self.error = error


class _StepThread(threading.Thread):
    """Runs ``body`` under ``lock``, unless it was given up on before the lock came."""

    def __init__(self, name: str, body: Callable[[], object],
                 lock: Callable[[], AbstractContextManager[None]]) -> None:
        super().__init__(name=f"hostcore-step-{name}", daemon=True)
        self.step = name
        self._body = body
        self._lock = lock
        self.finished = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None
        self._started_at: float | None = None
        # Guards _started_at and _given_up together: the loop's thread decides whether
        # a step it gives up on had started, and this one whether it may start.
        self._handshake = threading.Lock()
        self._given_up = False

    def run(self) -> None:
        try:
            with self._lock():
                with self._handshake:
                    if self._given_up:
                        return
                    self._started_at = time.monotonic()
                self.result = self._body()
        except BaseException as exc:  # sys.exit() included: a failed step, not an exit
            self.error = exc
        finally:
            self.finished.set()

    def give_up(self) -> bool:
        """Stop waiting for this step; whether its code had started."""
        with self._handshake:
            self._given_up = True
            return self._started_at is not None

    def running_since(self) -> float | None:
        with self._handshake:
            return self._started_at


def deadline_of(worker: object, default: float = STEP_DEADLINE_SECONDS) -> float:
    """The seconds a worker's step (or a source's read) may run: its
    ``deadline_seconds``, else ``default``. Raises ``ValueError`` for a value that is
    not a positive number, so the step fails saying so instead of running unwatched."""
    declared = getattr(worker, "deadline_seconds", None)
    if declared is None:
        return default
    if isinstance(declared, bool) or not isinstance(declared, int | float) or not declared > 0:
        raise ValueError(f"deadline_seconds must be a positive number, not {declared!r}")
    return float(declared)


def supervise(name: str, body: Callable[[], object], *,
              lock: Callable[[], AbstractContextManager[None]], scope: Hashable,
              deadline: float, stop: Any = None, grace: float | None = None,
              progress: Callable[[], float] | None = None) -> Supervised:
    """Run ``body`` under ``lock`` on a daemon thread named for step ``name`` and
    wait for it, at most ``deadline`` seconds from when it holds the lock, and at
    most ``grace`` seconds (default :data:`STOP_GRACE_SECONDS`) once ``stop``
    (anything with ``is_set()``) is set. ``progress``, when given, returns the
    :func:`time.monotonic` of the step's latest progress: the deadline then counts
    from the later of it and the step's start, for a step whose length has no
    bound of its own (an export to the end of the feed).

    The wait for the lock itself is bounded by the lock (its timeout), and by a
    stop request. An abandoned step, while its code runs, is one of
    :func:`abandoned` ``(scope)``: what ``lock`` guards (the tick passes its root).
    """
    grace = STOP_GRACE_SECONDS if grace is None else grace
    thread = _StepThread(name, body, lock)
    thread.start()
    try:
        why = _watch(thread, deadline, stop, grace, progress)
    except BaseException:
        # A KeyboardInterrupt in an embedder's main thread, say: the step goes on
        # without a watcher, so later ticks must know it may hold the lock.
        if thread.give_up():
            _ABANDONED.append((scope, thread))
        raise
    if why is None:
        return Supervised("returned", result=thread.result, error=thread.error)
    if not thread.give_up():
        return Supervised("never_started")
    _ABANDONED.append((scope, thread))
    return Supervised("abandoned", error=StepAbandoned(
        f"abandoned, {why}; its code is left running on its thread"))


def _watch(thread: _StepThread, deadline: float, stop: Any, grace: float,
           progress: Callable[[], float] | None) -> str | None:
    """Wait for ``thread``; ``None`` once it finished, else why to give up on it."""
    stop_seen: float | None = None
    while not thread.finished.wait(WATCH_SECONDS):
        now = time.monotonic()
        if stop_seen is None and stop is not None and stop.is_set():
            stop_seen = now
        since = thread.running_since()
        if stop_seen is not None and now - stop_seen >= grace:
            return f"still running {grace:g} s after the stop request"
        if since is None:
            continue  # still waiting for its lock
        if progress is not None:
            since = max(since, progress())
        if now - since >= deadline:
            return (f"{deadline:g} s without progress" if progress is not None
                    else f"still running past its deadline of {deadline:g} s")
    return None


class CommandStepFailed(HostcoreError):
    """A command's supervised step ended by a ``BaseException`` that is no
    ``Exception`` (a ``SystemExit`` in plugin code): the command failed, never
    exited as that exception asked. The message names the step and the exception."""


def run_command_step(name: str, body: Callable[[], object], *,
                     lock: Callable[[], AbstractContextManager[None]], scope: Hashable,
                     deadline: float, stop: Any = None,
                     progress: Callable[[], float] | None = None) -> object:
    """:func:`supervise` for a command that runs plugin code outside a tick (``poll``,
    ``export``): the step's result, or None when a stop request came while it waited
    for its lock (its code never ran).

    Raises what the step raised when that is an ``Exception`` (the command reports it
    as it would have on its own thread), :class:`StepAbandoned` naming the step when
    it was abandoned (the command must then exit: its code may still hold the lock),
    and :class:`CommandStepFailed` for any other ``BaseException``, so plugin code
    cannot make a failed command exit 0.
    """
    outcome = supervise(name, body, lock=lock, scope=scope, deadline=deadline, stop=stop,
                        progress=progress)
    error = outcome.error
    if error is None:
        return outcome.result
    if outcome.ending == "abandoned":
        raise StepAbandoned(f"step {name!r} {error}")
    if isinstance(error, Exception):
        raise error
    raise CommandStepFailed(f"step {name!r} failed: {type(error).__name__}: {error}") from error


def abandoned(scope: Hashable) -> list[str]:
    """The names of the steps abandoned in ``scope`` whose code still runs."""
    _ABANDONED[:] = [(s, t) for s, t in _ABANDONED if t.is_alive()]
    return [t.step for s, t in _ABANDONED if s == scope]


# Abandoned step threads of this process, with their scope, pruned as they end.
_ABANDONED: list[tuple[Hashable, _StepThread]] = []


class StdoutGuard:
    """Keep plugin output off hostcore's stdout while ``hostcore run`` runs.

    Within the block, ``sys.stdout`` writes to stderr, but for what the thread
    that entered it prints within :meth:`reports`: hostcore's reports alone reach
    the real stdout, not what a step prints (on its thread, or one it starts),
    nor a telemetry sink the loop's thread calls. When stdout is the process's
    file descriptor 1, that descriptor is pointed at stderr too, so a child
    process a plugin starts, or C code, cannot write into it either; the reports
    go through a duplicate.
    """

    def __init__(self) -> None:
        self._saved = sys.stdout
        self._duplicate: TextIO | None = None
        self._routed: _RoutedStdout | None = None

    def __enter__(self) -> StdoutGuard:
        self._saved = out = sys.stdout
        if _is_fd(out, 1) and _is_fd(sys.stderr, 2):
            out.flush()
            # os.dup's copy is not inherited by children (PEP 446).
            line_buffered = getattr(self._saved, "line_buffering", False)
            self._duplicate = out = open(
                os.dup(1), "w", buffering=1 if line_buffered else -1,
                encoding=self._saved.encoding, errors=self._saved.errors)
            os.dup2(2, 1)
        sys.stdout = self._routed = _RoutedStdout(out, threading.current_thread())
        return self

    @contextlib.contextmanager
    def reports(self) -> Iterator[None]:
        """What the entering thread prints within this block goes to the real stdout."""
        routed = self._routed
        if routed is None:
            yield
            return
        routed.reporting = True
        try:
            yield
        finally:
            routed.reporting = False

    def __exit__(self, *exc_info: object) -> None:
        sys.stdout = self._saved
        if self._routed is not None:
            with contextlib.suppress(OSError, ValueError):
                self._routed.flush()
            self._routed = None
        if self._duplicate is not None:
            os.dup2(self._duplicate.fileno(), 1)
            self._duplicate.close()
            self._duplicate = None


def _is_fd(stream: TextIO, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return False


class _RoutedStdout(io.TextIOBase):
    """``sys.stdout`` under :class:`StdoutGuard`: ``owner``'s writes while
    ``reporting`` go to ``out``, every other write to the current ``sys.stderr``."""

    def __init__(self, out: TextIO, owner: threading.Thread) -> None:
        super().__init__()
        self._out = out
        self._owner = owner
        self.reporting = False

    def _target(self) -> TextIO:
        if self.reporting and threading.current_thread() is self._owner:
            return self._out
        return sys.stderr

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._out.flush()
        sys.stderr.flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        return self._target().fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._target().encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._target().errors

    @property
    def buffer(self) -> Any:
        return self._target().buffer
