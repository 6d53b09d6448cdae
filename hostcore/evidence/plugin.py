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

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hostcore.errors import HostcoreError, RecordError
from hostcore.evidence.rows import SourceBatch
from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import Source, StepFailed, WorkerResult, availability
from hostcore.records import convert
from hostcore.steps import StepAbandoned, abandoned, deadline_of, supervise
from hostcore.telemetry import EventSpec

if TYPE_CHECKING:
    import click

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
        {"reason": ("raised", "bad_batch", "hung")},
        "One source failed this tick and was skipped (it raised, returned a bad batch, or "
        "its read ran past its deadline and was left running); the others still "
        "ingested. The log names the source.",
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
# and its last batch's transaction, with room for a slow source's one read.
INGEST_DEADLINE_SECONDS = 300.0
# How long one read of a source (one batch) may run unless the source declares its
# own ``deadline_seconds``: a transcript batch takes well under a second. A read past
# it is left running on its thread, the source is skipped (``hung``) until it returns,
# and the other sources go on: one hung source never stops them.
SOURCE_READ_DEADLINE_SECONDS = 60.0


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

    Each batch is staged (:meth:`Store.stage <hostcore.evidence.store.Store.stage>`)
    before the store's write lock is taken, then stored as one transaction with
    its cursor, before the next batch is read.
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
            batches = _Batches(host, counts, cursors)
            while ready:
                ready = [source for source in ready if batches.read_once(source)]
                if self._clock() >= deadline:
                    break
        except Exception as exc:
            # The batches stored before the store failed (a full disk) stay stored.
            raise StepFailed(counts) from exc
        failed = batches.failed
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


class _Batches:
    """One ingest step's batches on their way into the store: each is staged once
    read, outside the store's write lock, then stored with its cursor before the
    next is read.

    One thread does both. Storing behind the reading on a thread of its own (as
    0.2.7 and before did) gained wall clock only while a second core sat idle, and
    cost about a fifth more CPU on two cores (each thread slower beside the other,
    and the global lock passed back and forth): benchmarks/ingest.py."""

    def __init__(self, host: Host, counts: dict[str, int],
                 cursors: dict[str, str | None]) -> None:
        self._host = host
        self._counts = counts
        # Each source's cursor after its last batch stored.
        self._cursors = cursors
        # Sources that failed this step, with the kind of failure.
        self.failed: dict[str, str] = {}

    def read_once(self, source: Source) -> bool:
        """Read one batch of ``source`` and store it; True when it has more ready."""
        name = source.name
        if name in self.failed:
            return False
        scope = (self._host.root, "source", name)
        if abandoned(scope):  # an earlier read still runs: never two at once
            self._fail(name, "hung", StepAbandoned("a read past its deadline still runs"))
            return False
        try:
            deadline = deadline_of(source, SOURCE_READ_DEADLINE_SECONDS)
        except ValueError as exc:
            self._fail(name, "raised", exc)
            return False
        cursor = self._cursors[name]
        # On a watched thread of its own, as a step runs: a read that hangs is left
        # there, and one that calls sys.exit() fails this source alone.
        read = supervise(f"source-{name}", lambda: source.read(cursor),
                         lock=contextlib.nullcontext, scope=scope, deadline=deadline)
        if read.error is not None:
            self._fail(name, "hung" if read.ending == "abandoned" else "raised", read.error)
            return False
        batch = read.result
        try:
            if not isinstance(batch, SourceBatch):
                batch = convert(batch, SourceBatch, what=f"source {name!r} batch")
        except (RecordError, TypeError, ValueError) as exc:
            self._fail(name, "bad_batch", exc)
            return False
        store = self._host.store
        staged = store.stage(batch.rows) if batch.rows else None
        try:
            outcome = store.ingest(name, batch, previous=self._cursors[name], staged=staged)
        except (RecordError, TypeError, ValueError) as exc:
            # The batch, not the store, is at fault (a StoreError says the store
            # cannot be used: that fails the whole step).
            self._fail(name, "bad_batch", exc)
            return False
        self._cursors[name] = batch.cursor
        counts = self._counts
        counts["rows"] += outcome.inserted
        counts["lines_skipped"] += sum(batch.skipped.values()) + sum(outcome.rejected.values())
        if self._host.progress is not None:
            self._host.progress(f"ingest: {counts['rows']:,} rows so far")
        return batch.more

    def _fail(self, name: str, reason: str, exc: BaseException) -> None:
        host = self._host
        self._counts["failed"] += 1
        kind = f"{reason}: {type(exc).__name__}"
        self.failed[name] = kind
        # The message can carry a path: its kind at warning, the rest at debug.
        log.warning("source %r failed and was skipped this tick: %s", name, kind)
        log.debug("source %r failed", name, exc_info=exc)
        host.emit("evidence.source_failed", reason=reason)
        host.store.record_failure(name, kind)


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
