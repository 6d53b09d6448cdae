"""Built-in: the ``poll`` worker, the ``hostcore poll`` command and the poller's events.

The worker runs one poll cycle over every registered provider per tick (at most
one per ``[poll] interval_seconds`` in a long-running process); its ``status()``
is the ledger's part of ``hostcore status``. ``hostcore poll --once`` runs one
cycle and exits, for cron; ``hostcore poll`` cycles until SIGINT or SIGTERM.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hostcore.errors import HostcoreError
from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import WorkerResult, availability
from hostcore.telemetry import EventSpec
from hostcore.workitems.summary import (
    LEDGER_DIR,
    PollSummary,
    idle_cycle,
    keep_last_cycle,
    read_last_cycle,
)

if TYPE_CHECKING:
    import click

    from hostcore.host import Host

_SCOPE_COUNTS = {f"scopes_{s}": int for s in ("complete", "failed", "interrupted", "degraded")}
_SETS = ("tracked", "ledger_only")

EVENTS = (
    EventSpec(
        "poll.cycle",
        {"available": bool, "listing": ("complete", "partial", "failed", "none"),
         "listed": int, "new": int, "changed": int, "tracked_checks": int,
         "ledger_checks": int, "closures": int, "moved": int, "paused": int,
         "future_stamps": int, "failing": int, "deferred": int, "gone": int, "held": int,
         "unresolved": int, "budget_spent": bool, "ledger_failed": bool,
         "errors": int, "duration_ms": int, **_SCOPE_COUNTS},
        "One provider's poll cycle: its listing's outcome and scope statuses, items "
        "listed, new and changed, closure questions asked about tracked and ledger-only "
        "records, records stamped ended or moved, records paused because their scope's "
        "listing proves nothing, stamps a wrong clock dated ahead, records whose question "
        "fails or waits on its backoff, records settled as gone, never-seen items held "
        "and stranded scopes unresolved, whether the time budget ran out or the ledger "
        "failed (each omitted when zero or false), and errors.",
    ),
    EventSpec(
        "poll.closure_detected",
        {"set": _SETS, "state": ("closed", "merged", "moved")},
        "A provider said an unlisted item ended (or moved to another ref); its record "
        "was stamped ended and its poll section forgotten.",
    ),
    EventSpec(
        "poll.item_error",
        {"stage": ("closure", "dispatch"), "set": _SETS, "will_retry": bool},
        "One item failed: a closure question the provider could not answer (asked again "
        "next cycle if tracked, after the window if ledger-only), or a work-item event "
        "receiver raised (re-delivered next cycle until the poller gives up).",
    ),
    EventSpec(
        "ledger.index_rebuilt",
        {"records": int, "malformed": int, "reason": ("missing", "damaged", "format",
                                                      "requested")},
        "The ledger index was derived again from the records: because it was missing, "
        "damaged, of another format, or on request.",
    ),
    EventSpec(
        "ledger.archived",
        {"archived": int, "skipped": int, "failed": bool},
        "A poll cycle moved ended records into the ledger's archive: records moved, "
        "records left live because they changed or did not read as ended, and whether "
        "the archive could not be written (every record then stays live).",
    ),
)


class PollFailed(HostcoreError):
    """A poll cycle ran but the ledger could not be written for some provider (a full
    disk): its cycle ended early. The message says why."""


# How long a poll step may run before the tick abandons it (seconds), unless twice
# [poll] cycle_budget_seconds (40 by default) is longer: a cycle keeps to its budget,
# and each gh call times out.
POLL_DEADLINE_SECONDS = 600.0


def poll_deadline(host: Host) -> float:
    """How long one poll cycle may run, in a tick or in ``hostcore poll`` (seconds)."""
    return max(POLL_DEADLINE_SECONDS, 2 * host.config.settings.poll.cycle_budget_seconds)


class PollWorker:
    """Runs a poll cycle each tick, no more often than ``[poll] interval_seconds``
    (read again from the config file each tick, so an edit takes effect at once).

    Scopes that failed or were interrupted are counted in the step's counts
    (``scopes_failed``, ``scopes_interrupted``) and named in ``hostcore status``
    (``last_cycle_unlisted``, from the last cycle of any process: no closure is
    decided for them until they list completely);
    the step fails (:class:`PollFailed`) only when the ledger could not be
    written, after the whole cycle ran.
    """

    name = "poll"
    order = 50

    def __init__(self, host: Host) -> None:
        self.host = host
        self._last_cycle: float | None = None
        self._summaries: list[PollSummary] = []  # this process's last cycle

    @property
    def deadline_seconds(self) -> float:
        return poll_deadline(self.host)

    def run(self, host: Host) -> WorkerResult:
        interval = host.reload_settings().poll.interval_seconds
        if self._last_cycle is not None and time.monotonic() - self._last_cycle < interval:
            return WorkerResult(counts={"skipped": 1})
        self._last_cycle = time.monotonic()
        refused: list[tuple[Any, str]] = []
        for provider in host.providers:
            reason = availability(provider)
            if reason is None:
                break  # one can list: a full cycle, which asks each provider itself
            refused.append((provider, reason))
        else:
            # Nothing can be listed, so nothing in the ledger can change: the poll
            # machinery is not even imported (see hostcore.workitems.summary).
            self._summaries = idle_cycle(refused, host.emit)
            if not host.read_only:
                keep_last_cycle(host.root / LEDGER_DIR, self._summaries)
            return WorkerResult(counts=_totals(self._summaries))
        summaries = self._summaries = host.poller.cycle(host.stop)
        failed = [f"{s.provider}: {s.ledger_error}" for s in summaries if s.ledger_error]
        if failed:
            raise PollFailed(f"the ledger could not be written: {'; '.join(failed)}")
        return WorkerResult(counts=_totals(summaries))

    def status(self) -> dict[str, Any]:
        report: dict[str, Any] = {"ledger": self.host.ledger.status()}
        # This process's last cycle, or the one any process kept on disk.
        last = self._summaries or read_last_cycle(self.host.root / LEDGER_DIR)
        if last:
            report["last_cycle"] = _totals(last)
            unlisted = {f"{s.provider}:{scope}": status for s in last
                        for scope, status in s.unlisted.items()}
            if unlisted:
                report["last_cycle_unlisted"] = unlisted
            unresolved = {f"{s.provider}:{scope}": state for s in last
                          for scope, state in s.unresolved.items()}
            if unresolved:
                report["last_cycle_unresolved"] = unresolved
        return report


def _totals(summaries: list[PollSummary]) -> dict[str, int]:
    keys = ("listed", "new", "changed", "closures", "moved", "tracked_checks",
            "ledger_checks", "paused", "future_stamps", "failing", "gone", "held")
    totals = {key: sum(getattr(s, key) for s in summaries) for key in keys}
    for status in ("failed", "interrupted"):
        totals[f"scopes_{status}"] = sum(s.scopes.get(status, 0) for s in summaries)
    totals["providers"] = len(summaries)
    # A provider nobody configured is normal (the quickstart): counted, not an error.
    totals["unconfigured"] = sum(not s.configured for s in summaries)
    totals["errors"] = sum(len(s.errors) for s in summaries if s.configured)
    return totals


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> PollWorker:
    return PollWorker(host)


# The commands this plugin adds: name -> ("module:attribute", one-line help).
# hostcore's command line lists them from here and imports a command's module only
# when that command runs (RootGroup, cli/app.py); the hook below gives any other
# group (an embedder's, the conformance kit's) the commands themselves.
DECLARED_COMMANDS = {
    "poll": ("hostcore.workitems.commands:poll_command",
             "Poll every work-item provider: list items, note changes, reconcile closures."),
}


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # The command modules load now, when a group asks for them: the host builds this
    # plugin on every start, and commands seldom run.
    add_declared(cli, DECLARED_COMMANDS)
