"""Built-in: the evidence kernel's plugin face.

* the three built-in policy inputs (class-per-entry list, sync opt-out set,
  ``.hostcoreignore`` dotfiles), registered like any third-party input;
* the ``ingest`` worker (order 10): each tick asks every registered source for
  evidence since its persisted cursor and appends it with the new cursor in one
  transaction per batch; a source that raises is logged by name, counted, kept
  in the store's health record and skipped, and the step then fails naming it;
* the ``evidence``, ``purge`` and ``policy`` commands (defined in
  :mod:`hostcore.evidence.commands`);
* the telemetry events of all of the above.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hostcore.errors import HostcoreError, RecordError
from hostcore.evidence.rows import SourceBatch
from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import Source, StepFailed, WorkerResult, availability
from hostcore.records import convert
from hostcore.telemetry import EventSpec

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    import click

    from hostcore.evidence.store import Appended, Staged
    from hostcore.host import Host

log = logging.getLogger("hostcore.evidence")

EVENTS = (
    EventSpec(
        "evidence.ingested",
        {"sources": int, "failed": int, "skipped": int, "rows": int, "lines_skipped": int,
         "more": bool},
        "The ingest step ran: how many sources were read, failed (raised or returned a "
        "bad batch) and were skipped as unavailable, how many rows were appended, how "
        "many input lines or rows were skipped (malformed, unstorable, ...), and whether "
        "a source has more ready now.",
    ),
    EventSpec(
        "evidence.source_failed",
        {"reason": ("raised", "bad_batch")},
        "One source failed this tick and was skipped; the others still ingested. The "
        "log names the source.",
    ),
    EventSpec(
        "evidence.purged",
        {"rows": int, "partitions": int, "selectors": int},
        "A user purged evidence: rows deleted, partitions that lost rows (each moved to a "
        "new epoch) and how many selectors the purge combined.",
    ),
    EventSpec(
        "policy.updated",
        {"input": ("class-list", "sync-opt-out"),
         "change": ("full", "local-only", "opt-out", "opt-in", "remove")},
        "A user changed a machine-local withholding input through the CLI.",
    ),
)

# How long one ingest step keeps reading batches before it hands the tick on
# and reports the rest as pending (seconds).
INGEST_SLICE_SECONDS = 2.0
# How long an ingest step may run before the tick abandons it (seconds): a slice
# and the batches stored behind it, with room for a slow source's one read.
INGEST_DEADLINE_SECONDS = 300.0
# The fewest rows a batch has to be stored on a thread of its own while the next
# batch is read; a smaller one (a tick's few new lines) is stored at once, as
# the thread would cost more than it saves.
BACKGROUND_MIN_ROWS = 1_000
# Batches handed to that thread and not stored yet, at most: with two, a slow
# commit (SQLite copying its log into the file) delays the reading by nothing.
BATCHES_IN_FLIGHT = 2
# The interpreter's thread switch interval while a batch is stored behind the
# reading of the next (seconds; see _Handover).
STORE_SWITCH_INTERVAL = 0.0002


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_policy_inputs(host: Host) -> tuple[Any, ...]:
    # Loads when a Host collects registrations, not when the plugin module is imported.
    from hostcore.evidence.inputs import (
        CLASS_LIST_FILE,
        OPT_OUT_FILE,
        ClassList,
        IgnoreDotfiles,
        SyncOptOut,
    )

    # The dotfile part covers the store's directories, so every process over this
    # root computes the same fingerprint (not one that depends on what it read).
    # Rows bring scopes and purges take them: the partitions' versions tell when
    # the directories must be read again, in one small read.
    return (ClassList(host.root / CLASS_LIST_FILE), SyncOptOut(host.root / OPT_OUT_FILE),
            IgnoreDotfiles(directories=lambda: host.store.directories(),
                           version=lambda: host.store.partitions()))


@hookimpl
def hostcore_workers(host: Host) -> IngestWorker:
    return IngestWorker(host)


class SourcesFailed(HostcoreError):
    """Sources failed this tick (each was skipped; the others ingested). The
    message names them and the kind of each failure, never its text."""


class IngestWorker:
    """Stores each source's new evidence with its cursor, one transaction per batch.

    Sources are read in rounds, one batch each per round, while any has more
    ready and the step's time slice (:data:`INGEST_SLICE_SECONDS`) lasts; then
    the step reports pending work and the tick loop comes back at once (``run
    --once`` drains). A source that raises, or returns a batch the store
    refuses, is skipped with its cursor unmoved, its failure is kept in the
    store (``hostcore status`` shows it), and once every other source had its
    turn the step fails naming it, so the exit status of ``run --once`` tells.

    A batch of :data:`BACKGROUND_MIN_ROWS` rows or more is staged on the reading
    thread (:meth:`Store.stage <hostcore.evidence.store.Store.stage>`) and stored
    on a thread of its own while the next ones are read (SQLite inserts a few
    thousand rows per call, during which Python runs on), so a backlog costs less
    than reading and storing one after the other. Each batch is still one
    transaction with its cursor, stored in the order read; a batch read after one
    of its source's batches failed is dropped.
    """

    name = "ingest"
    order = 10
    deadline_seconds = INGEST_DEADLINE_SECONDS

    def __init__(self, host: Host, *, slice_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._host = host
        self.slice_seconds = INGEST_SLICE_SECONDS if slice_seconds is None else slice_seconds
        self._clock = clock

    def run(self, host: Host) -> WorkerResult:
        counts = {"sources": 0, "failed": 0, "skipped": 0, "rows": 0, "lines_skipped": 0}
        ready: list[Source] = []
        for source in host.sources:
            if availability(source) is not None:
                counts["skipped"] += 1
            else:
                ready.append(source)
        counts["sources"] = len(ready)
        deadline = self._clock() + self.slice_seconds
        cursors = {s.name: host.store.source_cursor(s.name) for s in ready}
        try:
            with _Handover(host, counts, cursors) as handover:
                while ready:
                    ready = [source for source in ready if handover.read_once(source)]
                    if self._clock() >= deadline:
                        break
        except Exception as exc:
            # The batches stored before the store failed (a full disk) stay stored.
            raise StepFailed(counts) from exc
        failed = handover.failed
        pending = any(source.name not in failed for source in ready)
        host.emit("evidence.ingested", more=pending, **counts)
        if failed:
            raise StepFailed(counts) from SourcesFailed(
                f"{len(failed)} source(s) failed and were skipped: " + ", ".join(
                    f"{name!r} ({kind})" for name, kind in sorted(failed.items())))
        return WorkerResult(pending=pending, counts=counts)

    def status(self) -> dict[str, Any]:
        """Per source: lines skipped by reason, failures in a row, the last failure's
        kind and time (kept in the store, so any process can report them)."""
        health = self._host.store.source_health()
        names = sorted({source.name for source in self._host.sources} | set(health))
        sources: dict[str, Any] = {}
        for name in names:
            found = health.get(name)
            sources[name] = {} if found is None else {
                "skipped": dict(found.skipped), "failures": found.failures,
                "last_error": found.last_error, "last_error_at": found.last_error_at}
            sources[name].setdefault("skipped", {})
            sources[name].setdefault("failures", 0)
        return {"sources": sources}


class _Handover:
    """One ingest step's batches on their way into the store: each is handed over
    once read, and a large one is stored on a thread of its own while the next
    ones are read (up to :data:`BATCHES_IN_FLIGHT` wait their turn). Leaving the
    ``with`` block waits for every one."""

    def __init__(self, host: Host, counts: dict[str, int],
                 cursors: dict[str, str | None]) -> None:
        self._host = host
        self._counts = counts
        # Each source's cursor after its last batch handed over (stored, or being stored).
        self._cursors = cursors
        # Sources that failed this step, with the kind of failure.
        self.failed: dict[str, str] = {}
        self._writer: ThreadPoolExecutor | None = None  # made for the first large batch
        # Oldest first; the writer stores them in this order.
        self._in_flight: deque[tuple[str, SourceBatch, Future[Appended | None]]] = deque()
        # Sources one of whose batches the writer could not store: it drops their
        # later ones, whose cursors count on it. Only the writer thread adds to it.
        self._broken: set[str] = set()

    def __enter__(self) -> _Handover:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if exc_info[0] is None:
                self._finish()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)  # a batch in flight commits or fails whole
                _quick_switching.leave()

    def read_once(self, source: Source) -> bool:
        """Read one batch of ``source`` and hand it over; True when it has more ready."""
        name = source.name
        if name in self.failed:
            return False
        try:
            batch = source.read(self._cursors[name])
        except Exception as exc:
            self._fail(name, "raised", exc)
            return False
        try:
            if not isinstance(batch, SourceBatch):
                batch = convert(batch, SourceBatch, what=f"source {name!r} batch")
        except (RecordError, TypeError, ValueError) as exc:
            self._fail(name, "bad_batch", exc)
            return False
        at_once = len(batch.rows) < BACKGROUND_MIN_ROWS
        # A batch stored here waits for every one before it (the store is written in
        # order); one handed to the writer waits only for room in its queue, and the
        # writer drops it if a batch of its source ahead of it fails.
        self._finish(keep=0 if at_once else BATCHES_IN_FLIGHT - 1)
        if name in self.failed:
            return False  # read after a batch of its own that failed: dropped
        previous, self._cursors[name] = self._cursors[name], batch.cursor
        store = self._host.store
        if at_once:
            self._stored(name, batch, lambda: store.ingest(name, batch, previous=previous))
            return batch.more
        if self._writer is None:
            # Loaded for a step with a large batch: an idle or a quiet tick never needs it.
            from concurrent.futures import ThreadPoolExecutor

            self._writer = ThreadPoolExecutor(1, thread_name_prefix="hostcore-ingest")
            _quick_switching.enter()
        # Staged here, so the writer thread runs little but SQLite and seldom
        # takes Python's global lock from the reading.
        self._in_flight.append((name, batch, self._writer.submit(
            self._store_behind, name, batch, previous, store.stage(batch.rows))))
        return batch.more

    def _store_behind(self, name: str, batch: SourceBatch, previous: str | None,
                      staged: Staged | None) -> Appended | None:
        """Store ``batch`` (on the writer thread); None when an earlier batch of its
        source failed, as the step then drops it."""
        if name in self._broken:
            return None
        try:
            return self._host.store.ingest(name, batch, previous=previous, staged=staged)
        except BaseException:
            self._broken.add(name)
            raise

    def _finish(self, keep: int = 0) -> None:
        """Wait for batches in flight, oldest first, until ``keep`` are left, and
        count what each stored."""
        while len(self._in_flight) > keep:
            name, batch, future = self._in_flight.popleft()
            self._stored(name, batch, future.result)

    def _stored(self, name: str, batch: SourceBatch,
                store: Callable[[], Appended | None]) -> None:
        try:
            outcome = store()
        except (RecordError, TypeError, ValueError) as exc:
            # The batch, not the store, is at fault (a StoreError says the store
            # cannot be used: that fails the whole step).
            self._fail(name, "bad_batch", exc)
            return
        if outcome is None:
            return  # dropped behind a batch of its source that failed
        counts = self._counts
        counts["rows"] += outcome.inserted
        counts["lines_skipped"] += sum(batch.skipped.values()) + sum(outcome.rejected.values())
        if self._host.progress is not None:
            self._host.progress(f"ingest: {counts['rows']:,} rows so far")

    def _fail(self, name: str, reason: str, exc: Exception) -> None:
        self._finish()  # the store is written in order: the batches in flight first
        host = self._host
        self._counts["failed"] += 1
        kind = f"{reason}: {type(exc).__name__}"
        self.failed[name] = kind
        # The message can carry a path: its kind at warning, the rest at debug.
        log.warning("source %r failed and was skipped this tick: %s", name, kind)
        log.debug("source %r failed", name, exc_info=exc)
        host.emit("evidence.source_failed", reason=reason)
        host.store.record_failure(name, kind)


class _SwitchInterval:
    """The interpreter's thread switch interval, lowered to :data:`STORE_SWITCH_INTERVAL`
    while any ingest step stores behind its reading, and put back as found when the
    last such step ends (the steps of several hosts in one process may overlap).

    The writer takes Python's global lock back after each call into SQLite; at the
    default 5 ms a thread waits for it, a transaction's dozen short statements would
    wait longer than its insert takes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps = 0
        self._found = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._steps == 0:
                self._found = sys.getswitchinterval()
                sys.setswitchinterval(min(self._found, STORE_SWITCH_INTERVAL))
            self._steps += 1

    def leave(self) -> None:
        with self._lock:
            self._steps -= 1
            if self._steps == 0:
                sys.setswitchinterval(self._found)


_quick_switching = _SwitchInterval()


# The commands this plugin adds: name -> ("module:attribute", one-line help).
# hostcore's command line lists them from here and imports a command's module only
# when that command runs (RootGroup, cli/app.py); the hook below gives any other
# group (an embedder's, the conformance kit's) the commands themselves.
DECLARED_COMMANDS = {
    "evidence": ("hostcore.evidence.commands:evidence_command",
                 "Show evidence partitions, their versions (epoch:rowCount) and row counts."),
    "purge": ("hostcore.evidence.commands:purge_command",
              "Delete evidence matching every given selector (at least one)."),
    "policy": ("hostcore.evidence.commands:policy_group",
               "Show or change the withholding policy of the export seam."),
    "usage": ("hostcore.evidence.usage_command:usage_command",
              "Show tokens and cost of agents' sessions per day, session, project, model or "
              "machine, from the evidence store (counts only: no prompt, no answer)."),
}


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # The command modules load now, when a group asks for them: the host builds this
    # plugin on every start, and commands seldom run.
    add_declared(cli, DECLARED_COMMANDS)
