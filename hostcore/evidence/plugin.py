"""Built-in: the evidence kernel's plugin face.

* the three built-in policy inputs (class-per-entry list, sync opt-out set,
  ``.hostcoreignore`` dotfiles), registered like any third-party input;
* the ``ingest`` worker (order 10): each tick asks every registered source for
  evidence since its persisted cursor and appends it with the new cursor in one
  transaction; a source that raises is logged by name, counted and skipped;
* the ``evidence``, ``purge`` and ``policy`` commands (defined in
  :mod:`hostcore.evidence.commands`);
* the telemetry events of all of the above.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from hostcore.evidence.rows import SourceBatch
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import WorkerResult, availability
from hostcore.records import convert
from hostcore.telemetry import EventSpec

if TYPE_CHECKING:
    import click

    from hostcore.host import Host

log = logging.getLogger("hostcore.evidence")

EVENTS = (
    EventSpec(
        "evidence.ingested",
        {"sources": int, "failed": int, "skipped": int, "rows": int, "more": bool},
        "The ingest step ran: how many sources were read, failed (raised or returned a "
        "bad batch) and were skipped as unavailable, how many rows were appended, and "
        "whether a source has more ready now.",
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
         "change": ("full", "local-only", "opt-out", "opt-in")},
        "A user changed a machine-local withholding input through the CLI.",
    ),
)

_WINDOWS_PATH = re.compile(r"^([A-Za-z]:[\\/]|\\\\)")


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_policy_inputs(host: Host) -> tuple[Any, ...]:
    from hostcore.evidence.inputs import (
        CLASS_LIST_FILE,
        OPT_OUT_FILE,
        ClassList,
        IgnoreDotfiles,
        SyncOptOut,
    )

    return (ClassList(host.root / CLASS_LIST_FILE), SyncOptOut(host.root / OPT_OUT_FILE),
            IgnoreDotfiles())


@hookimpl
def hostcore_workers(host: Host) -> IngestWorker:
    return IngestWorker()


class IngestWorker:
    """Appends each source's new evidence with its cursor, one transaction per source."""

    name = "ingest"
    order = 10

    def run(self, host: Host) -> WorkerResult:
        store = host.store
        counts = {"sources": 0, "failed": 0, "skipped": 0, "rows": 0}
        more = False
        for source in host.sources:
            if availability(source) is not None:
                counts["skipped"] += 1
                continue
            counts["sources"] += 1
            try:
                batch = source.read(store.source_cursor(source.name))
            except Exception as exc:
                self._failed(host, counts, source.name, "raised", exc)
                continue
            try:
                if not isinstance(batch, SourceBatch):
                    batch = convert(batch, SourceBatch, what=f"source {source.name!r} batch")
                counts["rows"] += store.append(batch.rows, source=source.name,
                                               cursor=batch.cursor)
                if host.progress is not None:
                    host.progress(f"ingest: {counts['rows']:,} rows so far")
            except Exception as exc:
                self._failed(host, counts, source.name, "bad_batch", exc)
                continue
            more = more or batch.more
        host.emit("evidence.ingested", more=more, **counts)
        return WorkerResult(pending=more, counts=counts)

    def _failed(self, host: Host, counts: dict[str, int], name: str, reason: str,
                exc: Exception) -> None:
        counts["failed"] += 1
        # The message can carry a path: its kind at warning, the rest at debug.
        log.warning("source %r failed and was skipped this tick: %s", name,
                    type(exc).__name__)
        log.debug("source %r failed", name, exc_info=True)
        host.emit("evidence.source_failed", reason=reason)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    from hostcore.evidence.commands import evidence_command, policy_group, purge_command

    for command in (evidence_command, purge_command, policy_group):
        cli.add_command(command)
