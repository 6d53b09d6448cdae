"""The poller: list each provider's open items, note what changed, reconcile closures.

One cycle, per provider:

1. **List.** ``provider.list_items()`` returns a :class:`~hostcore.workitems.items.Listing`
   with a status per scope. New and changed items update their ``poll`` section
   and are dispatched through ``hostcore_work_item_event``.
2. **Reconcile**, only when no scope failed or was interrupted (absence from a
   partial listing proves nothing), in two sets that share one question,
   :meth:`Poller._ask_closure`:

   * the *tracked set*: unstamped records with a session, control, graph or
     collaborators section, not listed, owned by the provider, not in a degraded
     scope — asked every cycle;
   * the *ledger-only set*: unstamped poll-only records, not listed, and *due*:
     the later of ``lastPolledAt`` and ``closureCheckedAt`` is at least
     :data:`LEDGER_RECHECK_EVERY_CYCLES` times ``[poll] interval_seconds`` old (read
     each cycle). Longest-absent first, then by ref; at most
     :data:`LEDGER_CHECKS_PER_CYCLE` questions per provider per cycle.

   A closure stamps ``ended`` (clearing control and collaborators), dispatches a
   ``closed`` event, and only then forgets ``poll``: the record ends as ended
   only, never deleted. "Still open" and an unanswerable question both leave a
   tracked record alone and date a ledger-only one (``closureCheckedAt``, one
   write), so neither is asked again before the window passes.

Time on the ledger, not a cycle counter, measures absence: ``hostcore poll --once``
from cron is a new process every cycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from hostcore.errors import RecordError
from hostcore.plugin.registration import availability
from hostcore.timestamps import format_utc, parse_exact, utc_now
from hostcore.workitems.index import IndexEntry
from hostcore.workitems.items import (
    Closure,
    EventKind,
    Listing,
    ProviderError,
    WorkItem,
    WorkItemEvent,
    WorkItemRef,
)
from hostcore.workitems.ledger import Ledger, PollState
from hostcore.workitems.records import (
    ENDED,
    POLL,
    EndedStamp,
    GiveUp,
    PollSection,
    PortableRecord,
    absent_since_of,
)

if TYPE_CHECKING:
    from hostcore.host import Host

log = logging.getLogger("hostcore.workitems.poller")

# A ledger-only record is due once it has been absent this many poll intervals.
LEDGER_RECHECK_EVERY_CYCLES = 60
# At most this many closure questions about ledger-only records per provider per cycle.
LEDGER_CHECKS_PER_CYCLE = 20
# The seen-comments baseline keeps the newest this many comment ids.
_SEEN_COMMENTS_CAP = 200
# An unchanged listed item's lastPolledAt is rewritten once it is this many intervals old,
# not every cycle: a stable listing then costs no writes, and absence is measured at most
# this many intervals early.
LAST_POLLED_REFRESH_CYCLES = 5
# After this many failed dispatches of one item's event in a row the poller gives up on
# that version of the item (it tries again when the item changes).
DISPATCH_GIVE_UP_AFTER = 5

ClosureSet = Literal["tracked", "ledger_only"]
Dispatch = Callable[[WorkItemEvent], int]


class PollSummary(msgspec.Struct, kw_only=True):
    """What one cycle did for one provider (``hostcore poll --json`` keys)."""

    provider: str
    available: bool = True
    listing: str = "none"  # complete | partial | failed | none
    scopes: dict[str, int] = msgspec.field(default_factory=dict)
    listed: int = 0
    new: int = 0
    changed: int = 0
    commented: int = 0
    tracked_checks: int = 0
    ledger_checks: int = 0
    closures: int = 0
    errors: list[str] = msgspec.field(default_factory=list)
    duration_ms: int = 0


class Poller:
    """Polls ``providers`` into ``ledger``.

    :param dispatch: delivers a work-item event; returns how many receivers failed.
    :param emit: ``emit(event_name, **attributes)`` for telemetry.
    :param interval: returns ``[poll] interval_seconds``; called every cycle so a
        reloaded value is honoured.
    :param clock: the current time (UTC); tests inject a fixed one.
    :param recheck_every_cycles: the window, in intervals (tests inject small ones).
    :param checks_per_cycle: the ledger-only question cap per provider per cycle.
    """

    def __init__(
        self,
        ledger: Ledger,
        providers: Sequence[Any],
        *,
        dispatch: Dispatch,
        emit: Callable[..., object],
        interval: Callable[[], float],
        clock: Callable[[], datetime] = utc_now,
        recheck_every_cycles: int = LEDGER_RECHECK_EVERY_CYCLES,
        checks_per_cycle: int = LEDGER_CHECKS_PER_CYCLE,
    ) -> None:
        self.ledger = ledger
        self.state = PollState(ledger)
        self.providers = tuple(providers)
        self.dispatch = dispatch
        self.emit = emit
        self.interval = interval
        self.clock = clock
        self.recheck_every_cycles = recheck_every_cycles
        self.checks_per_cycle = checks_per_cycle
        self.last: list[PollSummary] = []

    @classmethod
    def for_host(cls, host: Host) -> Poller:
        """A poller over the host's ledger and providers, dispatching through its hook."""
        return cls(
            host.ledger,
            host.providers,
            dispatch=hook_dispatcher(host),
            emit=host.emit,
            interval=lambda: host.config.settings.poll.interval_seconds,
        )

    # -- a cycle -------------------------------------------------------------------

    def cycle(self, stop: Any = None) -> list[PollSummary]:
        """One poll cycle over every provider; a set ``stop`` event skips the rest."""
        summaries = []
        for provider in self.providers:
            if stop is not None and stop.is_set():
                break
            summaries.append(self.poll_provider(provider))
        self.last = summaries
        return summaries

    def poll_provider(self, provider: Any) -> PollSummary:
        started = time.monotonic()
        summary = PollSummary(provider=provider.name)
        moment = self.clock()
        now = format_utc(moment)
        reason = availability(provider)
        if reason is not None:
            summary.available = False
            summary.errors.append(reason)
        else:
            listing = self._list(provider, summary)
            if listing is not None:
                for item in listing.items:
                    try:
                        self._note_listed(provider, item, now, summary)
                    except RecordError as exc:  # malformed since read: left as it is
                        summary.errors.append(str(exc))
                if listing.reconcilable:
                    self._reconcile(provider, listing, moment, summary)
        summary.duration_ms = int((time.monotonic() - started) * 1000)
        self._emit_cycle(summary)
        return summary

    def _list(self, provider: Any, summary: PollSummary) -> Listing | None:
        try:
            listing = provider.list_items()
            if not isinstance(listing, Listing):
                raise TypeError(f"list_items() returned {type(listing).__name__}, not Listing")
        except ProviderError as exc:
            summary.listing = "failed"
            summary.errors.append(f"listing: {exc}")
            # The message can name a repository: the kind at warning, the text at debug.
            log.warning("provider %r could not list (ProviderError)", provider.name)
            log.debug("provider %r could not list: %s", provider.name, exc)
            return None
        except Exception as exc:
            summary.listing = "failed"
            summary.errors.append(f"listing: {type(exc).__name__}: {exc}")
            log.warning("provider %r listing raised %s", provider.name, type(exc).__name__)
            log.debug("provider %r listing raised", provider.name, exc_info=True)
            return None
        for scope in listing.scopes:
            summary.scopes[scope.status] = summary.scopes.get(scope.status, 0) + 1
            if scope.status != "complete" and scope.reason:
                summary.errors.append(f"{scope.scope}: {scope.status}: {scope.reason}")
        summary.listing = "complete" if listing.reconcilable else "partial"
        return listing

    # -- listed items ----------------------------------------------------------------

    def _note_listed(self, provider: Any, item: WorkItem, now: str, summary: PollSummary) -> None:
        try:
            ref = WorkItemRef.parse(item.ref.ref).ref
        except (AttributeError, ValueError) as exc:
            summary.errors.append(f"listed item: {exc}")
            return
        summary.listed += 1
        entry = self.ledger.entry(ref)
        if entry is not None and self._quiet(entry, item, now):
            return
        try:
            record = self.ledger.read(ref) or PortableRecord(ref=ref)
        except RecordError as exc:
            # Never overwrite what cannot be read: the record stays for a person to see.
            summary.errors.append(str(exc))
            log.debug("ledger: %s", exc)
            return
        poll = record.poll
        kinds: list[EventKind] = []
        new_comments: tuple[str, ...] = ()
        if poll is None or not poll.announced_at or record.ended is not None:
            kinds.append("opened")
        elif poll.updated_at != item.updated_at:
            kinds.append("changed")
        if poll is not None and item.comment_ids:
            seen = set(poll.seen_comments)
            new_comments = tuple(c for c in item.comment_ids if c not in seen)
            if new_comments:
                kinds.append("commented")
        if poll is not None and poll.gave_up is not None and "opened" not in kinds \
                and poll.updated_at == item.updated_at:
            kinds = []  # given up on this version of the item; wait for it to change
        base = poll or PollSection()
        failures = 0
        for kind in kinds:
            failures += self._deliver(WorkItemEvent(
                kind=kind, ref=WorkItemRef(ref), provider=provider.name, at=now, item=item,
                comment_ids=new_comments if kind == "commented" else ()))
        if failures:
            attempts = base.dispatch_failures + 1
            give_up = attempts >= DISPATCH_GIVE_UP_AFTER
            self.emit("poll.item_error", stage="dispatch", will_retry=not give_up)
            summary.errors.append(f"{ref}: {failures} work-item event receiver(s) failed")
            if give_up:
                new_poll = self._seen_poll(base, item, now, new_comments)
                new_poll = msgspec.structs.replace(
                    new_poll, dispatch_failures=attempts,
                    gave_up=GiveUp(at=now, failures=attempts))
            else:
                # Keep the old change marker (and no announcedAt on a first sight) so
                # the next cycle delivers the same events again.
                new_poll = msgspec.structs.replace(base, dispatch_failures=attempts,
                                                   last_polled_at=now)
        else:
            new_poll = self._seen_poll(base, item, now, new_comments)
            if kinds:
                new_poll = msgspec.structs.replace(
                    new_poll, dispatch_failures=0, gave_up=None,
                    announced_at=new_poll.announced_at or now)
        summary.new += "opened" in kinds and not failures
        summary.changed += "changed" in kinds and not failures
        summary.commented += "commented" in kinds and not failures
        # Re-read under the ledger lock: a receiver may have written the record (a
        # session, say) while the events were delivered. A listing of the item as
        # open is fresh proof that it is open: an old closure stamp no longer holds.
        self.ledger.update(ref, lambda current: msgspec.structs.replace(
            current, poll=new_poll, ended=None))

    def _quiet(self, entry: IndexEntry, item: WorkItem, now: str) -> bool:
        """True when the index shows the item unchanged and recently seen, so
        neither a read nor a write is needed (comment ids need the record)."""
        if entry.sections & POLL == 0 or entry.sections & ENDED or item.comment_ids:
            return False
        if entry.updated_at != item.updated_at:
            return False
        seen = parse_exact(entry.last_polled_at)
        current = parse_exact(now)
        refresh = timedelta(seconds=LAST_POLLED_REFRESH_CYCLES * self.interval())
        return seen is not None and current is not None and seen <= current < seen + refresh

    @staticmethod
    def _seen_poll(base: PollSection, item: WorkItem, now: str,
                   new_comments: tuple[str, ...]) -> PollSection:
        seen = list(base.seen_comments)
        if not base.seen_comments and item.comment_ids:
            seen = list(item.comment_ids)
        else:
            seen.extend(new_comments)
        return msgspec.structs.replace(base, last_polled_at=now, updated_at=item.updated_at,
                                       seen_comments=seen[-_SEEN_COMMENTS_CAP:])

    # -- closure reconciliation ----------------------------------------------------

    def _reconcile(self, provider: Any, listing: Listing, moment: datetime,
                   summary: PollSummary) -> None:
        now = format_utc(moment)
        open_refs = {item.ref.ref for item in listing.items}
        degraded = set(listing.scopes_with("degraded"))
        tracked = self.ledger.tracked()
        for entry in tracked:
            ref = entry.ref
            if ref in open_refs or not self._askable(provider, ref, degraded):
                continue
            summary.tracked_checks += 1
            try:
                self._ask_closure(provider, ref, "tracked", now, degraded, summary)
            except RecordError as exc:
                summary.errors.append(str(exc))
        window = timedelta(seconds=self.recheck_every_cycles * self.interval())
        cutoff = format_utc(moment - window)
        asked = 0
        for entry in self._ledger_candidates(open_refs, {e.ref for e in tracked}, cutoff):
            ref = entry.ref
            if not self._askable(provider, ref, degraded):
                continue
            if asked >= self.checks_per_cycle:
                break
            if not self._still_due(ref, cutoff):
                continue
            asked += 1
            summary.ledger_checks += 1
            try:
                if not self._ask_closure(provider, ref, "ledger_only", now, degraded, summary):
                    self.state.note_closure_check(ref, now)
            except RecordError as exc:  # the record went bad under us: nothing written
                summary.errors.append(str(exc))

    def _ledger_candidates(self, open_refs: set[str], tracked: set[str],
                           cutoff: str) -> Iterable[IndexEntry]:
        """Unstamped poll-only records, not listed, not tracked, parsing as refs and
        due at ``cutoff``; longest-absent first, then by ref. Ownership and
        degraded scopes are the caller's to check, so its cap counts questions."""
        for entry in self.ledger.ledger_only_due(cutoff):
            if entry.ref in open_refs or entry.ref in tracked:
                continue
            try:
                WorkItemRef.parse(entry.ref)
            except ValueError:
                log.debug("ledger: skipping a record whose ref does not parse")
                continue
            yield entry

    def _still_due(self, ref: str, cutoff: str) -> bool:
        """Re-read the record the index named: the index is a hint, never trusted."""
        try:
            record = self.ledger.read(ref)
        except RecordError as exc:
            log.debug("ledger: %s", exc)
            return False
        if record is None or record.poll is None or record.ended is not None:
            return False
        if any(getattr(record, name) is not None
               for name in ("session", "control", "graph", "collaborators")):
            return False
        return absent_since_of(record.poll) <= cutoff

    @staticmethod
    def _askable(provider: Any, ref: str, degraded: set[str]) -> bool:
        try:
            wref = WorkItemRef.parse(ref)
            return bool(provider.owns(wref)) and provider.scope_of(wref) not in degraded
        except ValueError:
            return False
        except Exception:
            log.debug("provider %r could not place a ref", provider.name, exc_info=True)
            return False

    def _ask_closure(self, provider: Any, ref: str, which: ClosureSet, now: str,
                     degraded: set[str], summary: PollSummary) -> bool:
        """Ask whether ``ref`` ended; on a closure run the close path. True only
        when a closure was recorded; "still open" and no answer are both False."""
        wref = WorkItemRef(ref)
        try:
            closure = provider.closure(wref)
            if not isinstance(closure, Closure):
                raise TypeError(f"closure() returned {type(closure).__name__}, not Closure")
        except ProviderError as exc:
            if exc.degrades_scope and exc.scope:
                degraded.add(exc.scope)
            self._item_error(summary, which, f"{ref}: {exc}")
            return False
        except Exception as exc:
            log.debug("provider %r closure(%s) raised", provider.name, ref, exc_info=True)
            self._item_error(summary, which, f"{ref}: {type(exc).__name__}: {exc}")
            return False
        if not closure.ended:
            return False
        self.emit("poll.closure_detected", set=which, state=closure.state)
        self._close(provider, ref, closure, now)
        self.state.forget(ref)
        summary.closures += 1
        return True

    def _item_error(self, summary: PollSummary, which: ClosureSet, message: str) -> None:
        # Both sets ask again: the tracked set next cycle, the ledger-only set after
        # the window (it is dated, so an unanswerable record cannot hold the queue).
        self.emit("poll.item_error", stage="closure", set=which, will_retry=True)
        summary.errors.append(message)
        log.info("a closure question failed")
        log.debug("closure question failed: %s", message)

    def _close(self, provider: Any, ref: str, closure: Closure, now: str) -> None:
        """The close path: stamp ``ended`` and clear control and collaborators (one
        write), then tell the receivers. The caller forgets ``poll`` afterwards."""

        def stamp(record: PortableRecord) -> PortableRecord:
            ended = EndedStamp(at=now, state=closure.state, state_reason=closure.state_reason,
                               closed_at=closure.closed_at, closed_by=closure.closed_by)
            return msgspec.structs.replace(record, ended=ended, control=None,
                                           collaborators=None)

        self.ledger.update(ref, stamp)
        event = WorkItemEvent(kind="closed", ref=WorkItemRef(ref), provider=provider.name,
                              at=now, closure=closure)
        if self._deliver(event):
            # The stamp is the durable fact; a receiver that missed it can read the ledger.
            self.emit("poll.item_error", stage="dispatch", will_retry=False)

    def _deliver(self, event: WorkItemEvent) -> int:
        try:
            return self.dispatch(event)
        except Exception:
            log.warning("work-item event dispatch raised", exc_info=True)
            return 1

    def _emit_cycle(self, summary: PollSummary) -> None:
        counts = {
            "available": summary.available,
            "listing": summary.listing,
            "listed": summary.listed,
            "new": summary.new,
            "changed": summary.changed,
            "tracked_checks": summary.tracked_checks,
            "ledger_checks": summary.ledger_checks or None,
            "closures": summary.closures or None,
            "errors": len(summary.errors),
            "scopes_complete": summary.scopes.get("complete", 0),
            "scopes_failed": summary.scopes.get("failed", 0),
            "scopes_interrupted": summary.scopes.get("interrupted", 0),
            "scopes_degraded": summary.scopes.get("degraded", 0),
            "duration_ms": summary.duration_ms,
        }
        self.emit("poll.cycle", **{k: v for k, v in counts.items() if v is not None})


def hook_dispatcher(host: Host) -> Dispatch:
    """Deliver an event to every ``hostcore_work_item_event`` implementation, each on
    its own, so one that raises neither stops the others nor the poller. Returns how
    many raised."""
    pm = host.plugins.pm
    name = "hostcore_work_item_event"
    impls = getattr(pm.hook, name).get_hookimpls()
    everyone = [plugin for _, plugin in pm.list_name_plugin()]
    callers = [
        (impl.plugin_name,
         pm.subset_hook_caller(name, remove_plugins=[p for p in everyone if p is not impl.plugin]))
        for impl in reversed(impls)
    ]

    def dispatch(event: WorkItemEvent) -> int:
        failed = 0
        for plugin_name, call in callers:
            try:
                call(event=event, host=host)
            except Exception as exc:
                failed += 1
                log.warning("plugin %r failed on a %s work-item event: %s", plugin_name,
                            event.kind, type(exc).__name__)
                log.debug("plugin %r failed", plugin_name, exc_info=True)
        return failed

    return dispatch

