"""What a poll cycle did for each provider, and the copy kept for other processes.

Apart from :mod:`hostcore.workitems.poller` so that what needs only the summary
(``hostcore status``, and a tick in which no provider is usable) reads and writes it
without importing the poll machinery, the ledger's index and its archive: on a root
where nothing can be polled (the quickstart, or ``gh`` missing) that import was the
largest part of a cold ``hostcore run --once`` tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from hostcore.files import ensure_dir, keep_report, read_report

log = logging.getLogger("hostcore.workitems.summary")

# The ledger's folder under a root, and the last cycle's summaries in it.
LEDGER_DIR = "ledger"
LAST_CYCLE_FILE = "last-cycle.json"


class PollSummary(msgspec.Struct, kw_only=True):
    """What one cycle did for one provider (``hostcore poll --json`` keys)."""

    provider: str
    available: bool = True
    configured: bool = True
    listing: str = "none"  # complete | partial | failed | none
    scopes: dict[str, int] = msgspec.field(default_factory=dict)
    unlisted: dict[str, str] = msgspec.field(default_factory=dict)
    listed: int = 0
    new: int = 0
    changed: int = 0
    commented: int = 0
    tracked_checks: int = 0
    ledger_checks: int = 0
    closures: int = 0
    moved: int = 0
    paused: int = 0
    future_stamps: int = 0
    tracked_stopped_at: str = ""
    failing: int = 0
    deferred: int = 0
    gone: int = 0
    held: int = 0
    capped: list[str] = msgspec.field(default_factory=list)
    unresolved: dict[str, str] = msgspec.field(default_factory=dict)
    budget_spent: bool = False
    ledger_error: str = ""
    errors: list[str] = msgspec.field(default_factory=list)
    duration_ms: int = 0

    def failures(self) -> list[str]:
        """What makes ``hostcore poll --once`` exit 1, one phrase each (names scopes):
        an unavailable provider that is configured, a listing that raised, a scope
        that failed, was interrupted (but not by the provider's own page cap) or was
        rate-limited, a scope whose relocation question fails, records whose closure
        question fails (asked again on their backoff), a ledger that could not be
        written."""
        if not self.available:
            return ["unavailable"] if self.configured else []
        found = ["could not list"] if self.listing == "failed" else []
        found += [f"{scope} ({status})" for scope, status in sorted(self.unlisted.items())
                  if status in ("failed", "degraded")
                  or (status == "interrupted" and scope not in self.capped)]
        found += [f"{scope} (could not tell whether it moved)"
                  for scope in sorted(self.unresolved)]
        if self.failing:
            found.append(f"{self.failing} record(s) whose closure question fails")
        if self.ledger_error:
            found.append(f"ledger: {self.ledger_error}")
        return found


def configured(provider: Any) -> bool:
    """False only when the provider says it has nothing to poll because nobody
    configured it (an optional ``configured()``); its unavailability is then normal."""
    check = getattr(provider, "configured", None)
    if not callable(check):
        return True
    try:
        return bool(check())
    except Exception:
        log.debug("provider %r configured() raised", provider.name, exc_info=True)
        return True


def unavailable(provider: Any, reason: str) -> PollSummary:
    """The summary of a provider whose ``availability()`` gave ``reason``: nothing
    listed, and the reason among its errors (a failure only if it is configured)."""
    return PollSummary(provider=provider.name, available=False,
                       configured=configured(provider), errors=[reason])


def emit_cycle(emit: Callable[..., object], summary: PollSummary) -> None:
    """Send ``summary`` as the ``poll.cycle`` event (counts only, never a scope name)."""
    counts = {
        "available": summary.available,
        "listing": summary.listing,
        "listed": summary.listed,
        "new": summary.new,
        "changed": summary.changed,
        "tracked_checks": summary.tracked_checks,
        "ledger_checks": summary.ledger_checks or None,
        "closures": summary.closures or None,
        "moved": summary.moved or None,
        "paused": summary.paused or None,
        "future_stamps": summary.future_stamps or None,
        "failing": summary.failing or None,
        "deferred": summary.deferred or None,
        "gone": summary.gone or None,
        "held": summary.held or None,
        "unresolved": len(summary.unresolved) or None,
        "budget_spent": summary.budget_spent or None,
        "ledger_failed": bool(summary.ledger_error) or None,
        "errors": len(summary.errors),
        "scopes_complete": summary.scopes.get("complete", 0),
        "scopes_failed": summary.scopes.get("failed", 0),
        "scopes_interrupted": summary.scopes.get("interrupted", 0),
        "scopes_degraded": summary.scopes.get("degraded", 0),
        "duration_ms": summary.duration_ms,
    }
    emit("poll.cycle", **{k: v for k, v in counts.items() if v is not None})


def idle_cycle(refused: Iterable[tuple[Any, str]], emit: Callable[..., object]
               ) -> list[PollSummary]:
    """The cycle of a tick in which no provider is usable: ``refused`` pairs each
    provider with why it is not. Each is summarised and evented as the poller does
    for an unavailable provider; nothing else happens (with nothing listed, no
    record changes, and ended ones wait for a cycle that can list to be archived)."""
    summaries = [unavailable(provider, reason) for provider, reason in refused]
    for summary in summaries:
        emit_cycle(emit, summary)
    return summaries


def keep_last_cycle(ledger_dir: Path, summaries: list[PollSummary]) -> None:
    """Keep ``summaries`` as the last cycle for ``hostcore status`` in any process
    (creating ``ledger_dir`` if need be). Like every report, never raises."""
    try:
        ensure_dir(ledger_dir)
    except OSError as exc:
        log.warning("could not keep the last poll cycle's summary: %s", type(exc).__name__)
        return
    keep_report(ledger_dir / LAST_CYCLE_FILE, summaries, "the last poll cycle's summary")


def read_last_cycle(ledger_dir: Path) -> list[PollSummary]:
    """The summaries the last cycle of any process kept in ``ledger_dir``; ``[]``
    when there are none or they cannot be read."""
    return read_report(ledger_dir / LAST_CYCLE_FILE, list[PollSummary]) or []
