"""The poller: list each provider's open items, note what changed, reconcile closures.

One cycle, per provider, within a share of ``[poll] cycle_budget_seconds``
(:mod:`hostcore.workitems.budget`):

1. **List.** ``provider.list_items()`` returns a :class:`~hostcore.workitems.items.Listing`
   with a status per scope. Before anything is announced, a provider that can say
   where a scope went (``relocate``) is asked about the scopes of records it no
   longer owns, when the listing shows items the ledger has never seen: records
   of a renamed repository are moved, not announced again. A scope it cannot
   answer about goes on a backoff and holds only the never-seen items that could
   be its own, for at most :data:`RELOCATE_HOLD_CYCLES` intervals. New and
   changed items update their ``poll`` section and are dispatched through
   ``hostcore_work_item_event``.
2. **Finish** the close paths a killed process left between stamp and forget.
3. **Reconcile, scope by scope.** A complete scope proves absence for its own
   records; an interrupted one that says up to which change marker it listed
   (``changed_since``) proves it for the records last seen changed after that;
   the records of every other scope (failed, degraded, interrupted without a
   marker) are *paused* and counted. Two sets share one question,
   :meth:`Poller._ask_closure`:

   * the *tracked set*: unstamped records with a session, control, graph or
     collaborators section, not listed, owned by the provider, in a proven scope
     — asked every cycle, each re-read first, the ones whose question failed
     last and only once their backoff has come;
   * the *ledger-only set*: unstamped poll-only records, not listed, in a proven
     scope and *due*: the later of ``lastPolledAt`` and ``closureCheckedAt`` is at
     least :data:`LEDGER_RECHECK_EVERY_CYCLES` times ``[poll] interval_seconds``
     old (read each cycle). A stamp more than that window in the future was
     written by a wrong clock: it reads as unparsable (due now), is counted, and
     is cleared on the record's next write. Longest-absent first, then by ref; at
     most :data:`LEDGER_CHECKS_PER_CYCLE` questions per provider per cycle.

   A closure stamps ``ended`` (clearing control and collaborators), dispatches a
   ``closed`` event, and only then forgets ``poll``: the record ends as ended
   only, never deleted. A *moved* answer (a transfer) does the same with a
   ``moved`` stamp naming the new ref, after seeding the new ref's record when
   the provider owns it. "Still open" leaves a tracked record alone and dates a
   ledger-only one (``closureCheckedAt``, one write). An unanswerable question
   writes its failure and next-ask time on the record (``poll.backoff``, see
   :mod:`hostcore.workitems.backoff`), in the same write as the date for a
   ledger-only one, so neither holds up another item; the cycle counts as failed
   while such a failure stands. An answer that the item is gone, once final,
   stops the questions.

Time on the ledger, not a cycle counter, measures absence: ``hostcore poll --once``
from cron is a new process every cycle. A ledger that cannot be written (a full
disk) ends that provider's part of the cycle with one line in its summary; the
other providers still run.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from hostcore.errors import RecordError
from hostcore.plugin.calls import callers, plugin_output
from hostcore.plugin.registration import availability
from hostcore.timestamps import format_utc, parse_exact, utc_now
from hostcore.workitems import backoff
from hostcore.workitems.backoff import Backoff
from hostcore.workitems.budget import CycleBudget, applied
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
from hostcore.workitems.ledger import ArchiveUnreadable, Ledger, PollState
from hostcore.workitems.records import (
    ENDED,
    POLL,
    EndedStamp,
    GiveUp,
    PollSection,
    PortableRecord,
    absent_since_of,
    backoff_of,
    kind_and_labels,
    record_class,
    with_backoff,
    without_future,
)
from hostcore.workitems.summary import (
    # Re-exported: they lived here until hostcore 0.2.8, and plugins import them from here.
    LAST_CYCLE_FILE as LAST_CYCLE_FILE,
)
from hostcore.workitems.summary import (
    PollSummary as PollSummary,
)
from hostcore.workitems.summary import (
    emit_cycle,
    keep_last_cycle,
    read_last_cycle,
    unavailable,
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
# A record ended this many poll intervals ago moves to the ledger's archive (an item
# that opens again soon after closing stays live), at most ARCHIVE_PER_CYCLE a cycle.
ARCHIVE_AFTER_CYCLES = LEDGER_RECHECK_EVERY_CYCLES
ARCHIVE_PER_CYCLE = 1_000
# At most this many scopes of records a provider no longer owns are asked, per provider
# per cycle, whether they were renamed (only in a cycle that lists never-seen items).
RELOCATE_SCOPES_PER_CYCLE = 10
# A tracked record whose question failed is asked again after this many intervals,
# doubling with each failure in a row up to the recheck window (with jitter; see
# hostcore.workitems.backoff). A ledger-only one is dated a window, as decision 115 says.
BACKOFF_BASE_CYCLES = 1
# Never-seen items that may be a renamed scope's wait for its relocation answer at most
# this many intervals after the question first failed; then they are announced.
RELOCATE_HOLD_CYCLES = LEDGER_RECHECK_EVERY_CYCLES

ClosureSet = Literal["tracked", "ledger_only"]
# A tracked record to ask: (its question is failing, when its backoff came, its index
# entry, its backoff).
_Due = tuple[bool, str, IndexEntry, Backoff | None]
Verdict = Literal["ask", "paused", "unowned"]
Dispatch = Callable[[WorkItemEvent], int]
# A scope whose absences prove something: "" for a complete listing, else the change
# marker after which an interrupted listing is complete.
Proof = dict[str, str]


class Poller:
    """Polls ``providers`` into ``ledger``.

    :param dispatch: delivers a work-item event; returns how many receivers failed.
    :param emit: ``emit(event_name, **attributes)`` for telemetry.
    :param interval: returns ``[poll] interval_seconds``; called every cycle so a
        reloaded value is honoured.
    :param budget: returns ``[poll] cycle_budget_seconds`` (``None``: unbounded);
        called every cycle.
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
        budget: Callable[[], float | None] = lambda: None,
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
        self.budget = budget
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
            budget=lambda: host.config.settings.poll.cycle_budget_seconds,
        )

    # -- a cycle -------------------------------------------------------------------

    def cycle(self, stop: threading.Event | None = None) -> list[PollSummary]:
        """One poll cycle over every provider; a set ``stop`` event skips the rest.

        Each provider gets an equal share of what is left of the cycle's budget
        (time one leaves unused goes to the next), so a hung provider cannot take
        the others' time."""
        seconds = self.budget()
        deadline = None if seconds is None else time.monotonic() + seconds
        summaries = []
        for index, provider in enumerate(self.providers):
            if stop is not None and stop.is_set():
                break
            share = None
            if deadline is not None:
                now = time.monotonic()
                share = now + max(0.0, deadline - now) / (len(self.providers) - index)
            summaries.append(self.poll_provider(provider, CycleBudget(share, stop)))
        self.last = summaries
        if not self.ledger.read_only:
            if stop is None or not stop.is_set():
                self._archive_ended()
            keep_last_cycle(self.ledger.directory, summaries)
        return summaries

    def _archive_ended(self) -> None:
        """Move records ended more than :data:`ARCHIVE_AFTER_CYCLES` intervals ago into
        the ledger's archive, at most :data:`ARCHIVE_PER_CYCLE`. A failure leaves them
        live for a later cycle and is logged and evented; it never ends the cycle."""
        age = timedelta(seconds=ARCHIVE_AFTER_CYCLES * self.interval())
        try:
            done = self.ledger.archive_ended(format_utc(self.clock() - age), ARCHIVE_PER_CYCLE)
        except (OSError, sqlite3.DatabaseError, RecordError) as exc:
            log.warning("ended records could not be archived (%s)", type(exc).__name__)
            self.emit("ledger.archived", archived=0, skipped=0, failed=True)
            return
        if done.archived or done.skipped:
            self.emit("ledger.archived", archived=done.archived, skipped=done.skipped,
                      failed=False)

    def last_cycle(self) -> list[PollSummary]:
        """The last cycle's summaries: this process's, else those the last cycle of
        any process kept; ``[]`` when there are none or they cannot be read."""
        return self.last or read_last_cycle(self.ledger.directory)

    def poll_provider(self, provider: Any, budget: CycleBudget | None = None) -> PollSummary:
        """One provider's part of a cycle, within ``budget`` (default: unbounded)."""
        budget = budget or CycleBudget(None)
        started = time.monotonic()
        reason = availability(provider)
        if reason is not None:
            summary = unavailable(provider, reason)
        else:
            summary = PollSummary(provider=provider.name)
            with applied(budget):
                try:
                    self._poll(provider, self.clock(), budget, summary)
                except (OSError, sqlite3.DatabaseError) as exc:
                    self._ledger_failed(summary, exc)
        summary.duration_ms = int((time.monotonic() - started) * 1000)
        emit_cycle(self.emit, summary)
        return summary

    def _poll(self, provider: Any, moment: datetime, budget: CycleBudget,
              summary: PollSummary) -> None:
        now = format_utc(moment)
        window = timedelta(seconds=self.recheck_every_cycles * self.interval())
        horizon = format_utc(moment + window)
        listing = self._list(provider, summary)
        if listing is None:
            return
        items = self._valid_items(listing, summary)
        known = {ref: self.ledger.entry(ref) for ref, _ in items}
        if any(entry is None for entry in known.values()):
            hold = self._relocate(provider, moment, window, budget, summary)
            known = {ref: entry or self.ledger.entry(ref) for ref, entry in known.items()}
        else:
            # No item to place: still ask, once a window, about scopes no longer owned
            # (a renamed repository with nothing open under its new name).
            hold = self._relocate(provider, moment, window, budget, summary,
                                  asked_before=format_utc(moment - window))
        waiting = self._may_have_moved(provider, known) if hold else set()
        summary.held = len(waiting)
        # A listed record with a failing question is rewritten even when quiet: listed,
        # it is open, so its backoff goes (and its failure no longer stands).
        retrying = self._retrying()
        for ref, item in items:
            if ref in waiting:
                continue
            try:
                self._note_listed(provider, ref, item, known[ref], now, horizon, summary,
                                  quiet=ref not in retrying)
            except RecordError as exc:  # malformed since read: left as it is
                summary.errors.append(str(exc))
        open_refs = {ref for ref, _ in items}
        self._finish_forgets(provider, open_refs)
        if not budget.stopped():
            self._reconcile(provider, listing, open_refs, moment, window, budget, summary)
        summary.failing = sum(1 for ref in self._retrying() if _owns(provider, ref))

    def _retrying(self) -> set[str]:
        """The unstamped records whose last question failed and is to be asked again,
        asked this cycle or not (a ledger-only one waits a window): one index query
        over the few rows it marks (``retry_at``). The ``+`` keeps SQLite on the
        partial index of those rows: by ``class`` it would walk every live record
        (0.3 s a call at 100k live records)."""
        return {entry.ref for entry in self.ledger.index.entries(
            "retry_at != '' AND +class IN ('tracked', 'ledger_only')", ())}

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
            if scope.status != "complete":
                summary.unlisted[scope.scope] = scope.status
                if scope.reason:
                    summary.errors.append(f"{scope.scope}: {scope.status}: {scope.reason}")
            if scope.capped:
                summary.capped.append(scope.scope)
        # A rate-limited scope listed nothing: the listing is not complete either.
        summary.listing = ("complete" if all(s.status == "complete" for s in listing.scopes)
                           else "partial")
        return listing

    @staticmethod
    def _valid_items(listing: Listing, summary: PollSummary) -> list[tuple[str, WorkItem]]:
        """The listed items whose ref parses, as ``(ref, item)``; the others are errors."""
        items = []
        for item in listing.items:
            try:
                ref = WorkItemRef.parse(item.ref.ref).ref
            except (AttributeError, ValueError) as exc:
                summary.errors.append(f"listed item: {exc}")
                continue
            summary.listed += 1
            items.append((ref, item))
        return items

    # -- listed items ----------------------------------------------------------------

    def _note_listed(self, provider: Any, ref: str, item: WorkItem, entry: IndexEntry | None,
                     now: str, horizon: str, summary: PollSummary, *,
                     quiet: bool = True) -> None:
        """Deliver what changed about a listed item and note it on its record; with
        ``quiet`` (the default), an item the index shows unchanged and recently seen
        costs nothing."""
        if entry is not None and parse_exact(entry.last_polled_at) \
                and entry.last_polled_at > horizon:
            summary.future_stamps += 1  # rewritten below: the listing is fresh proof
        if quiet and entry is not None and self._quiet(entry, item, now):
            return
        try:
            record = self.ledger.read(ref) or PortableRecord(ref=ref)
        except ArchiveUnreadable:
            # No live file to overwrite; a broken archive must not stop every new item.
            record = PortableRecord(ref=ref)
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
        # Listed, so open: a closure question that was failing about it is moot.
        new_poll = without_future(msgspec.structs.replace(new_poll, backoff=None), horizon)
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
                                       seen_comments=seen[-_SEEN_COMMENTS_CAP:],
                                       kind=item.kind, labels=list(item.labels))

    # -- moved scopes and items ----------------------------------------------------

    def _relocate(self, provider: Any, moment: datetime, window: timedelta,
                  budget: CycleBudget, summary: PollSummary, *,
                  asked_before: str | None = None) -> bool:
        """Move the records of scopes the provider says were renamed into its own.

        Asked in every cycle whose listing shows never-seen items, so a renamed
        repository's items are moved before anything is announced under the new
        name; otherwise (``asked_before``) only about records neither seen nor
        asked about since then, so a scope dropped from the configuration on
        purpose costs one question a window. A record that did not move is stamped
        asked.

        A scope whose question fails is put on a backoff kept on its first record
        (by ref: the one :meth:`_stranded` names first), asked again only when that
        comes, and named in ``summary.unresolved`` (a failure of the cycle) until it
        answers. Returns True while the never-seen items that may be its renamed
        items must wait: some scope is unresolved, its first failure less than
        :data:`RELOCATE_HOLD_CYCLES` intervals ago, or was not asked for lack of time.
        """
        relocate = getattr(provider, "relocate", None)
        if not callable(relocate):
            return False
        now = format_utc(moment)
        hold = False
        stranded = self._stranded(provider, asked_before)
        for scope, refs in stranded[:RELOCATE_SCOPES_PER_CYCLE]:
            first = refs[0].ref
            previous = self._backoff_of(first)
            if not backoff.due(previous, moment):
                summary.unresolved[scope] = "waiting"
                hold = hold or self._holding(previous, moment)
                continue
            if budget.spent():
                return True
            try:
                moves = relocate(scope, refs)
                if not isinstance(moves, Mapping):
                    raise TypeError(f"relocate() returned {type(moves).__name__}, not a mapping")
            except Exception as exc:
                detail = str(exc) if isinstance(exc, ProviderError) \
                    else f"{type(exc).__name__}: {exc}"
                failed = backoff.failed(
                    previous, moment, base=self._backoff_base(), cap=window,
                    error=detail)
                self.ledger.update(first, partial(_failing, failing=failed))
                summary.unresolved[scope] = "failed"
                summary.errors.append(f"{scope}: could not tell whether it moved: {detail}; "
                                      f"asked again after {failed.next_ask_at}")
                hold = hold or self._holding(failed, moment)
                log.info("a relocation question failed (%s)", type(exc).__name__)
                continue
            wanted = {ref.ref for ref in refs}
            moved: set[str] = set()
            for old, new in sorted(moves.items()):
                target = self._target(str(old), new)
                if str(old) not in wanted or target is None:
                    summary.errors.append(f"{scope}: relocate() named a move it cannot make")
                    continue
                try:
                    self._move(provider, str(old), Closure(state="moved", moved_to=target),
                               now, summary)
                    moved.add(str(old))
                except RecordError as exc:
                    summary.errors.append(str(exc))
            for ref in sorted(wanted - moved):  # asked: not again this window
                self.ledger.update(ref, lambda record: _dated(record, now, "", None))
        return hold

    def _backoff_base(self) -> timedelta:
        return timedelta(seconds=BACKOFF_BASE_CYCLES * self.interval())

    def _holding(self, failing: Backoff | None, moment: datetime) -> bool:
        """Whether never-seen items still wait for a relocation answer that fails:
        until :data:`RELOCATE_HOLD_CYCLES` intervals after its first failure."""
        if failing is None:
            return False
        first = parse_exact(failing.first_failed_at)
        bound = timedelta(seconds=RELOCATE_HOLD_CYCLES * self.interval())
        return first is None or moment - first < bound

    def _backoff_of(self, ref: str) -> Backoff | None:
        try:
            return backoff_of(self.ledger.read(ref))
        except RecordError as exc:
            log.debug("ledger: %s", exc)
            return None

    @staticmethod
    def _may_have_moved(provider: Any, known: Mapping[str, IndexEntry | None]) -> set[str]:
        """The never-seen listed items that could be a renamed scope's items: those of
        scopes of which no listed item is in the ledger yet (a renamed repository's
        items all arrive under a name the ledger has not seen). New items of a scope
        the ledger already knows are new, whatever a relocation question says."""
        seen = {_scope(provider, ref) for ref, entry in known.items() if entry is not None}
        return {ref for ref, entry in known.items()
                if entry is None and ((scope := _scope(provider, ref)) is None
                                      or scope not in seen)}

    def _stranded(self, provider: Any, asked_before: str | None = None
                  ) -> list[tuple[str, tuple[WorkItemRef, ...]]]:
        """``(scope, refs)`` for each scope (as the provider places it) of unstamped
        records it does not own (with ``asked_before``, only records neither seen
        listed nor asked about since); the scope seen listed most recently first,
        as a renamed repository's records were seen until the configuration
        changed."""
        latest: dict[str, str] = {}
        refs: dict[str, list[WorkItemRef]] = {}
        # One index query for the scope keys, one range per foreign key: the records of
        # the provider's own scopes are never walked.
        for key, sample in self.ledger.unstamped_scopes():
            if _foreign_scope(provider, sample) is None:
                continue
            for entry in self.ledger.unstamped_in(key, asked_before):
                scope = _foreign_scope(provider, entry.ref)
                if scope is None:
                    continue
                refs.setdefault(scope, []).append(WorkItemRef(entry.ref))
                latest[scope] = max(latest.get(scope, ""), entry.last_polled_at)
        order = sorted(refs, key=lambda scope: (latest[scope], scope), reverse=True)
        return [(scope, tuple(refs[scope])) for scope in order]

    @staticmethod
    def _target(ref: str, new: object) -> str | None:
        """``new`` as a ref, if it is one and not ``ref`` itself; else ``None``."""
        try:
            target = WorkItemRef.parse(new.ref if isinstance(new, WorkItemRef) else new).ref
        except ValueError:
            return None
        return target if target != ref else None

    def _move(self, provider: Any, ref: str, closure: Closure, now: str,
              summary: PollSummary) -> bool:
        """``ref`` now lives at ``closure.moved_to``. When the provider owns that ref,
        its record first takes every section of this one it lacks (``poll`` too, so
        the item is not announced again there; a session stays with its item); then
        the close path stamps this one ``moved``."""
        new = closure.moved_to
        if _owns(provider, new):
            old = self.ledger.read(ref)
            if old is not None and old.ended is None:
                self.ledger.update(new, lambda current: _taking_missing(current, old))
        stamped = self._close(provider, ref, closure, now)
        self.state.forget(ref)
        summary.moved += stamped
        return stamped

    def _finish_forgets(self, provider: Any, open_refs: set[str]) -> None:
        """A record both stamped and polled, not listed, is a close path a killed
        process left between its stamp and its forget: finish it."""
        for entry in self.ledger.stamped_and_polled():
            if entry.ref not in open_refs and _owns(provider, entry.ref):
                self.state.forget(entry.ref)

    # -- closure reconciliation ----------------------------------------------------

    def _reconcile(self, provider: Any, listing: Listing, open_refs: set[str],
                   moment: datetime, window: timedelta, budget: CycleBudget,
                   summary: PollSummary) -> None:
        now = format_utc(moment)
        horizon = format_utc(moment + window)
        proof = _proof(listing)
        tracked = self.ledger.tracked()
        # Healthy records first, then those whose question failed before and whose
        # backoff has come (soonest first): one that never answers cannot be first
        # every cycle and spend the time or the scope's proof of the others.
        due: list[_Due] = []
        for entry in tracked:
            if entry.ref in open_refs:
                continue
            verdict = self._verdict(provider, entry, proof)
            if verdict != "ask":
                summary.paused += verdict == "paused"
                continue
            record = self._reread(entry.ref, summary)
            if record is None or record_class(record) != "tracked":
                continue  # the index row was stale (ended or gone since): nothing to ask
            previous = backoff_of(record)
            if previous is not None and previous.final:
                summary.gone += 1
                continue
            if not backoff.due(previous, moment):
                summary.deferred += 1
                continue
            failing = backoff.standing(previous)
            due.append((failing, previous.next_ask_at if previous and failing else "",
                        entry, previous))
        for _, _, entry, previous in self._resumed(provider, due):
            if self._verdict(provider, entry, proof) != "ask":
                summary.paused += 1  # an answer degraded its scope since
                continue
            if budget.spent():
                summary.budget_spent = True
                break
            summary.tracked_checks += 1
            summary.tracked_stopped_at = entry.ref
            try:
                self._ask_closure(provider, entry.ref, "tracked", moment, horizon, proof,
                                  summary, previous)
            except RecordError as exc:
                summary.errors.append(str(exc))
        cutoff = format_utc(moment - window)
        candidates = list(self._ledger_candidates(open_refs, {e.ref for e in tracked},
                                                  cutoff, horizon))
        summary.future_stamps += sum(1 for e in candidates
                                     if e.absent_since > horizon and _owns(provider, e.ref))
        asked = 0
        for entry in candidates:
            verdict = self._verdict(provider, entry, proof)
            if verdict != "ask":
                summary.paused += verdict == "paused"
                continue
            if asked >= self.checks_per_cycle or summary.budget_spent:
                continue
            record = self._still_due(entry.ref, cutoff, horizon)
            if record is None:
                continue
            previous = backoff_of(record)
            if previous is not None and previous.final:
                # Gone for good: not asked, only dated, so it leaves the due set a window.
                summary.gone += 1
                self.ledger.update(entry.ref, partial(_dated, now=now, horizon=horizon,
                                                      failing=previous))
                continue
            if budget.spent():
                summary.budget_spent = True
                continue
            asked += 1
            summary.ledger_checks += 1
            try:
                self._ask_closure(provider, entry.ref, "ledger_only", moment, horizon, proof,
                                  summary, previous)
            except RecordError as exc:  # the record went bad under us: nothing written
                summary.errors.append(str(exc))

    def _resumed(self, provider: Any, due: list[_Due]) -> list[_Due]:
        """``due`` in asking order: healthy records by ref, starting after the last
        one asked when the last cycle's budget ran out (so a budget too small for the
        set still reaches all of it, cycle after cycle), then the failing ones,
        soonest backoff first. The place is read from the last cycle's summary: a
        lost one only starts the round again."""
        ordered = sorted(due, key=lambda d: (d[0], d[1], d[2].ref))
        last = next((s for s in self.last_cycle() if s.provider == provider.name), None)
        if last is None or not last.budget_spent or not last.tracked_stopped_at:
            return ordered
        healthy = [d for d in ordered if not d[0]]
        cut = sum(1 for d in healthy if d[2].ref <= last.tracked_stopped_at)
        return healthy[cut:] + healthy[:cut] + [d for d in ordered if d[0]]

    def _ledger_candidates(self, open_refs: set[str], tracked: set[str], cutoff: str,
                           horizon: str) -> Iterable[IndexEntry]:
        """Unstamped poll-only records, not listed, not tracked, parsing as refs and
        due at ``cutoff`` (a stamp past ``horizon`` reads as unparsable: due);
        longest-absent first, then by ref. Ownership and paused scopes are the
        caller's to check, so its cap counts questions."""
        for entry in self.ledger.ledger_only_due(cutoff, horizon):
            if entry.ref in open_refs or entry.ref in tracked:
                continue
            try:
                WorkItemRef.parse(entry.ref)
            except ValueError:
                log.debug("ledger: skipping a record whose ref does not parse")
                continue
            yield entry

    def _still_due(self, ref: str, cutoff: str, horizon: str) -> PortableRecord | None:
        """Re-read the record the index named (the index is a hint, never trusted):
        the record while it is still a due ledger-only one, else ``None``."""
        try:
            record = self.ledger.read(ref)
        except RecordError as exc:
            log.debug("ledger: %s", exc)
            return None
        if record is None or record.poll is None or record_class(record) != "ledger_only":
            return None
        return record if absent_since_of(record.poll, horizon) <= cutoff else None

    def _reread(self, ref: str, summary: PollSummary) -> PortableRecord | None:
        """The record as it is now; ``None`` (and an error) when it no longer reads."""
        try:
            return self.ledger.read(ref)
        except RecordError as exc:
            summary.errors.append(str(exc))
            return None

    @staticmethod
    def _verdict(provider: Any, entry: IndexEntry, proof: Proof) -> Verdict:
        """``ask`` when the provider owns the record and its scope's listing proves
        the absence; ``paused`` when it owns it but the listing cannot; else ``unowned``."""
        try:
            wref = WorkItemRef.parse(entry.ref)
            if not provider.owns(wref):
                return "unowned"
            scope = provider.scope_of(wref)
        except ValueError:
            return "unowned"
        except Exception:
            log.debug("provider %r could not place a ref", provider.name, exc_info=True)
            return "unowned"
        if scope not in proof:
            return "paused"
        marker = proof[scope]
        return "ask" if not marker or entry.updated_at > marker else "paused"

    def _ask_closure(self, provider: Any, ref: str, which: ClosureSet, moment: datetime,
                     horizon: str, proof: Proof, summary: PollSummary,
                     previous: Backoff | None) -> None:
        """Ask whether ``ref`` ended; on a closure (or a move) run the close path.

        "Still open" drops the record's backoff; a ledger-only record is also dated
        (one write). A failed question writes its backoff (``previous`` and one more
        failure) on the record, in the same write as the date for a ledger-only one:
        a tracked record is asked again when it comes, a ledger-only one after the
        window. An answer that degrades its scope takes the scope's proof away for
        the cycle."""
        now = format_utc(moment)
        wref = WorkItemRef(ref)
        try:
            closure = provider.closure(wref)
            if not isinstance(closure, Closure):
                raise TypeError(f"closure() returned {type(closure).__name__}, not Closure")
        except ProviderError as exc:
            if exc.degrades_scope and exc.scope:
                proof.pop(exc.scope, None)
            self._failed(ref, which, moment, horizon, summary, previous, f"{ref}: {exc}",
                         gone=exc.gone, final=exc.final)
            return
        except Exception as exc:
            log.debug("provider %r closure(%s) raised", provider.name, ref, exc_info=True)
            self._failed(ref, which, moment, horizon, summary, previous,
                         f"{ref}: {type(exc).__name__}: {exc}")
            return
        if closure.ended and closure.state == "moved":
            target = self._target(ref, closure.moved_to)
            if target is None:  # a move to nowhere proves nothing: no stamp on doubt
                self._failed(ref, which, moment, horizon, summary, previous,
                             f"{ref}: answered moved without a new ref")
                return
            if self._move(provider, ref, msgspec.structs.replace(closure, moved_to=target),
                          now, summary):
                self.emit("poll.closure_detected", set=which, state="moved")
            return
        if closure.ended:
            if self._close(provider, ref, closure, now):
                self.emit("poll.closure_detected", set=which, state=closure.state)
                summary.closures += 1
            self.state.forget(ref)
            return
        if which == "ledger_only":
            self.ledger.update(ref, lambda record: _dated(record, now, horizon, None))
        elif previous is not None:
            self.ledger.update(ref, lambda record: with_backoff(record, None))

    def _failed(self, ref: str, which: ClosureSet, moment: datetime, horizon: str,
                summary: PollSummary, previous: Backoff | None, message: str, *,
                gone: bool = False, final: bool = False) -> None:
        """Keep a failed question's backoff on the record, count and report it."""
        window = timedelta(seconds=self.recheck_every_cycles * self.interval())
        # A ledger-only record waits a window, exactly (decision 115's dating).
        base = window if which == "ledger_only" else self._backoff_base()
        failed = backoff.failed(previous, moment, base=base, cap=window, error=message,
                                gone=gone, final=final, jitter=which == "tracked")
        now = format_utc(moment)
        if which == "ledger_only":
            self.ledger.update(ref, lambda record: _dated(record, now, horizon, failed))
        else:
            self.ledger.update(ref, partial(_failing, failing=failed))
        summary.gone += failed.final
        self.emit("poll.item_error", stage="closure", set=which, will_retry=not failed.final)
        summary.errors.append(message)
        log.info("a closure question failed")
        log.debug("closure question failed: %s", message)

    def _close(self, provider: Any, ref: str, closure: Closure, now: str) -> bool:
        """The close path: stamp ``ended`` and clear control and collaborators (one
        write), then tell the receivers. The caller forgets ``poll`` afterwards.
        False, with nothing written or told, when the record is already stamped (a
        stale index row named it): an item ends once."""

        def stamp(record: PortableRecord) -> PortableRecord | None:
            if record.ended is not None:
                return None
            # The kind and labels go onto the stamp: `poll`, which held them, is
            # forgotten next, and an ended item is still found by them.
            kind, labels = kind_and_labels(record)
            ended = EndedStamp(at=now, state=closure.state, state_reason=closure.state_reason,
                               closed_at=closure.closed_at, closed_by=closure.closed_by,
                               moved_to=closure.moved_to, kind=kind, labels=labels)
            return msgspec.structs.replace(record, ended=ended, control=None,
                                           collaborators=None)

        if self.ledger.update(ref, stamp) is None:
            return False
        kind: EventKind = "moved" if closure.state == "moved" else "closed"
        event = WorkItemEvent(kind=kind, ref=WorkItemRef(ref), provider=provider.name,
                              at=now, closure=closure)
        if self._deliver(event):
            # The stamp is the durable fact; a receiver that missed it can read the ledger.
            self.emit("poll.item_error", stage="dispatch", will_retry=False)
        return True

    def _deliver(self, event: WorkItemEvent) -> int:
        try:
            return self.dispatch(event)
        except Exception:
            log.warning("work-item event dispatch raised", exc_info=True)
            return 1

    @staticmethod
    def _ledger_failed(summary: PollSummary, exc: OSError | sqlite3.DatabaseError) -> None:
        what = (exc.strerror if isinstance(exc, OSError) and exc.strerror
                else str(exc) or type(exc).__name__)
        if isinstance(exc, OSError) and exc.filename:
            what = f"{exc.filename}: {what}"  # for the person reading stderr, not the log
        summary.ledger_error = what
        summary.errors.append(f"ledger: {what}; the rest of this provider's cycle was skipped")
        # The summary carries it to the command's output and the poll step's result.
        log.info("the ledger could not be used (%s); a provider's cycle ended early",
                 type(exc).__name__)


def _proof(listing: Listing) -> Proof:
    """The scopes whose listing proves absence: complete ones (``""``), and interrupted
    ones that say up to which change marker they are complete."""
    proof: Proof = {}
    for scope in listing.scopes:
        if scope.status == "complete":
            proof[scope.scope] = ""
        elif scope.status == "interrupted" and scope.changed_since:
            proof[scope.scope] = scope.changed_since
    return proof


def _taking_missing(current: PortableRecord, old: PortableRecord) -> PortableRecord | None:
    """``current`` with the sections of ``old`` it lacks (``None``: it lacks none)."""
    names = ("poll", "session", "control", "graph", "collaborators")
    taken = {name: getattr(old, name) for name in names
             if getattr(current, name) is None and getattr(old, name) is not None}
    if old.poll is not None and "poll" in taken:  # the old ref's failures are not the new one's
        taken["poll"] = msgspec.structs.replace(old.poll, backoff=None)
    return msgspec.structs.replace(current, **taken) if taken else None

def _dated(record: PortableRecord, now: str, horizon: str,
           failing: Backoff | None) -> PortableRecord | None:
    """``record`` asked at ``now`` and not told it ended: ``closureCheckedAt`` set, the
    backoff set to ``failing`` (dropped for ``None``), a stamp past ``horizon`` (a wrong
    clock's) cleared, in one write. A record with no ``poll`` section is left alone."""
    if record.poll is None:
        return None
    poll = msgspec.structs.replace(record.poll, closure_checked_at=now, backoff=failing)
    return msgspec.structs.replace(record, poll=without_future(poll, horizon) if horizon
                                   else poll)


def _failing(record: PortableRecord, failing: Backoff) -> PortableRecord | None:
    """``record`` with the backoff of a failed question; nothing once it is stamped."""
    return None if record.ended is not None else with_backoff(record, failing)


def _scope(provider: Any, ref: str) -> str | None:
    """The scope the provider places ``ref`` in; ``None`` when it cannot place it."""
    try:
        return str(provider.scope_of(WorkItemRef.parse(ref)))
    except Exception:
        return None


def _owns(provider: Any, ref: str) -> bool:
    try:
        return bool(provider.owns(WorkItemRef.parse(ref)))
    except Exception:
        return False


def _foreign_scope(provider: Any, ref: str) -> str | None:
    """The scope the provider would place ``ref`` in, for a ref it does not own;
    ``None`` for its own refs and refs it cannot place."""
    try:
        wref = WorkItemRef.parse(ref)
        if provider.owns(wref):
            return None
        return str(provider.scope_of(wref))
    except Exception:
        return None


def hook_dispatcher(host: Host) -> Dispatch:
    """Deliver an event to every ``hostcore_work_item_event`` implementation, each on
    its own, so one that raises neither stops the others nor the poller. Returns how
    many raised. A receiver that raises is not failed as a plugin: the poller
    delivers the event again next cycle, up to its limit."""
    receivers = list(callers(host.plugins, "hostcore_work_item_event"))

    def dispatch(event: WorkItemEvent) -> int:
        failed = 0
        for plugin_name, call in receivers:
            try:
                with plugin_output():  # `poll --json` is hostcore's stdout
                    call(event=event, host=host)
            except Exception as exc:
                failed += 1
                log.warning("plugin %r failed on a %s work-item event: %s", plugin_name,
                            event.kind, type(exc).__name__)
                log.debug("plugin %r failed", plugin_name, exc_info=True)
        return failed

    return dispatch

