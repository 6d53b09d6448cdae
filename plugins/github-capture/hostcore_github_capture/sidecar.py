"""The inventory sidecar: ordinary ticks, revalidation triggers, bounded passes, the swap.

Every tick starts from persisted state and a few cheap reads: the export policy
fingerprint, the store's instance id and partition versions, the clock. From
them it decides, afresh each time (nothing about a trigger is stored but the
pass it started):

* **revalidate** when the fingerprint differs from the one the inventory was
  derived under (none persisted included), when the store is not the one the
  partition marks describe (a replaced file; none recorded included), when a
  tracked partition regressed (its version is not a growth of the tracked one,
  or it is gone), or when the last completed derivation is older than
  :data:`MAX_DERIVATION_AGE_SECONDS` or stamped in the future by a wrong clock;
* otherwise **extend**: read only what grown or new partitions hold after their
  cursors. A tick where nothing changed opens no partition and reads no row.

**Budgets count positions examined, permitted or not.** The seam skips withheld
rows inside SQLite, where they still cost time, so a budget counted in the rows
it returns would not bound the work. Every read here is a window of positions
``(cursor, until]`` of one partition, and what it costs is the smaller of the
window's width and the rows the partition can hold after ``cursor`` (from its
version, no row read); the cursor moves to ``until`` even when every row in
the window was withheld.

A pass re-reads history through the export seam, so it sees exactly what the
live policy lets out. When it starts it notes every partition's version and
then the store's head position; it reads what lies at or before that head, and
the rows appended later are the ordinary ticks' after the swap. A pass **by
rows** reads every partition's rows in one window of ``row_budget`` positions a
tick, so a store whose head is ``H`` converges in ``ceil(H / row_budget)``
ticks however much of it is withheld. A pass **by tuples** (the default)
reads the distinct (directory, source, remote) of the store, which it keeps as
rows come and go, through :meth:`ExportSeam.read_tuples_since_sync` under the
same per-scope verdicts, one window of ``tuple_budget`` tuple ids a tick: it
confirms the keys a pass by rows would, in ``ceil(T / tuple_budget)`` ticks for
a tuple head ``T`` however many tuples are withheld. Its work grows with
distinct tuples, never rows.

Progress is persisted after every slice (confirmed keys, the window's position
or the tuple cursors), so a later tick or a restarted process carries on. A
fingerprint change, a replaced store or a regression of a partition the pass
noted restarts it. When it is complete, one atomic write swaps the inventory
in, stamps the fingerprint, the store and the time, and clears the pass. Until
then capture sees only the keys the pass confirmed.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from operator import itemgetter
from typing import Any, Protocol

import msgspec

from hostcore.evidence.rows import PartitionVersion
from hostcore_github_capture.events import UNITS
from hostcore_github_capture.remotes import KeyReducer
from hostcore_github_capture.stamps import ahead
from hostcore_github_capture.state import (
    PartitionMark,
    Revalidation,
    SidecarState,
    StateFile,
)

# Positions one tick may examine, across partitions, in a pass by rows or an extension.
REVALIDATION_ROW_BUDGET = 50_000
# Distinct (directory, source, remote) tuples one tick may read in a pass by tuples.
REVALIDATION_TUPLE_BUDGET = 50_000
# The backstop for withholding inputs the fingerprint cannot see (ignore dotfiles).
MAX_DERIVATION_AGE_SECONDS = 7 * 24 * 3600.0
# Capture output: stored like evidence, exported through the seam, never inventory input.
CAPTURE_PARTITION = "github_events"

# What a pass reads unless configured otherwise: the property test over random
# histories (tests/test_capture_unit_equivalence.py) finds both units derive the
# same inventory, and tuples converge in a tick where rows take dozens.
DEFAULT_UNIT = "tuples"
_COLUMNS = ("git_remote",)
# A window of tuple ids spans every partition: each tuple says whose it is.
_TUPLE_COLUMNS = ("partition", "git_remote")
# Rows taken from the seam's stream at a time: bounds what a read holds at once.
CHUNK_ROWS = 1024
_remote = itemgetter(1)


class StoreLike(Protocol):
    @property
    def instance_id(self) -> str: ...

    def partitions(self) -> Mapping[str, PartitionVersion]: ...

    def head_position(self) -> int: ...


class SeamLike(Protocol):
    def export_policy_fingerprint(self) -> str: ...

    def read_rows_since_sync(self, partition: str | None, cursor: int, columns: Sequence[str],
                             *, until: int | None = None) -> Iterator[tuple[Any, ...]]: ...

    def read_tuples_since_sync(self, partition: str | None, cursor: int,
                               columns: Sequence[str], *, until: int | None = None
                               ) -> Iterator[tuple[Any, ...]]: ...

    def tuple_head_sync(self) -> int: ...


class TickOutcome(msgspec.Struct, kw_only=True):
    """What one sidecar tick did (counts only).

    ``positions_read`` is what the tick charged to its row budget (positions
    examined, withheld rows included); ``examined`` is what it charged to the
    budget of its unit (positions, or tuple ids in a pass by tuples, withheld
    tuples included); ``rows_read`` and ``tuples_read`` are what the seam let out.
    """

    positions_read: int = 0
    examined: int = 0
    rows_read: int = 0
    tuples_read: int = 0
    started: str | None = None  # the trigger of a pass started or restarted this tick
    revalidating: bool = False  # a pass is still under way after this tick
    swapped: bool = False
    added: int = 0  # keys an extension added
    extension_pending: bool = False

    @property
    def pending(self) -> bool:
        return self.revalidating or self.extension_pending


class Progress(msgspec.Struct, kw_only=True):
    """Where a pass stands, for status and the ``revalidate`` progress line.

    ``positions_read`` / ``positions_total``: how far a pass by rows has read
    towards the head it noted (``None`` for a pass by tuples). Both units read
    every partition at once and complete them together: ``partitions_done``
    counts those read to their end.
    """

    trigger: str
    unit: str
    positions_read: int | None
    positions_total: int | None
    rows_read: int
    tuples_read: int
    confirmed: int
    partitions_done: int
    partitions_total: int
    slices: int


class Sidecar:
    """Keeps ``sidecar.json`` in step with what the export seam lets out.

    :param store: anything with ``instance_id``, ``partitions()`` and
        ``head_position()`` (the host's store).
    :param seam: the export seam (``export_policy_fingerprint``, ``read_rows_since_sync``,
        ``read_tuples_since_sync``).
    :param state: the ``sidecar.json`` file.
    :param emit: the host's ``emit``.
    :param clock: seconds since the epoch (tests inject one).
    :param row_budget: positions examined per tick (tests inject small values).
    :param unit: what a new pass reads, ``rows`` or ``tuples`` (a pass under way
        keeps the unit it started with).
    :param tuple_budget: tuples per tick in a pass by tuples.
    """

    def __init__(
        self,
        store: StoreLike,
        seam: SeamLike,
        state: StateFile[SidecarState],
        emit: Callable[..., object],
        *,
        clock: Callable[[], float] = time.time,
        row_budget: int = REVALIDATION_ROW_BUDGET,
        unit: str = DEFAULT_UNIT,
        tuple_budget: int = REVALIDATION_TUPLE_BUDGET,
    ) -> None:
        if row_budget < 1 or tuple_budget < 1:
            raise ValueError(f"budgets must be at least 1, not {row_budget}/{tuple_budget}")
        if unit not in UNITS:
            raise ValueError(f"unit {unit!r}: expected one of {', '.join(UNITS)}")
        self.store = store
        self.seam = seam
        self.state = state
        self.emit = emit
        self.clock = clock
        self.row_budget = row_budget
        self.unit = unit
        self.tuple_budget = tuple_budget
        # Kept across ticks: a pass meets the same remotes tick after tick.
        self._reducer = KeyReducer()

    # -- reading the situation (no history rows) ---------------------------------

    def _discover(self) -> dict[str, PartitionVersion]:
        return {name: version for name, version in self.store.partitions().items()
                if name != CAPTURE_PARTITION}

    def trigger(self, state: SidecarState, fingerprint: str, instance: str,
                versions: Mapping[str, PartitionVersion], now: float) -> str | None:
        """The reason a pass must start now, or ``None`` (when no pass is under way)."""
        if state.policy_fingerprint is None:
            fresh = state.derived_at is None and not state.repos and not state.partitions
            return "initial" if fresh else "fingerprint"
        if state.policy_fingerprint != fingerprint:
            return "fingerprint"
        if state.store_instance != instance:
            return "replaced"
        for name, mark in state.partitions.items():
            if _regressed(versions.get(name), mark.version):
                return "regressed"
        if state.derived_at is None or now - state.derived_at > MAX_DERIVATION_AGE_SECONDS \
                or derivation_ahead(state, now):
            return "age"
        return None

    @staticmethod
    def restart_reason(record: Revalidation, fingerprint: str, instance: str,
                       versions: Mapping[str, PartitionVersion]) -> str | None:
        """Why the pass under way can no longer complete as it is, or ``None``."""
        if record.head is None:
            return record.trigger  # noted by an older release: start it over, same cause
        if record.fingerprint != fingerprint:
            return "fingerprint"
        if record.store_instance != instance:
            return "replaced"
        for name, version in record.versions.items():
            if _regressed(versions.get(name), version):
                return "regressed"
        return None

    def pending(self) -> bool:
        """Whether a tick now would read history (a pass, a trigger, or new rows)."""
        state = self.state.load()
        fingerprint = self.seam.export_policy_fingerprint()
        versions = self._discover()
        if state.revalidation is not None:
            return True
        if self.trigger(state, fingerprint, self.store.instance_id, versions,
                        self.clock()) is not None:
            return True
        return any(_needs_reading(state.partitions.get(n), v) for n, v in versions.items())

    def progress(self) -> Progress | None:
        """The pass under way, as counts; ``None`` when there is none."""
        record = self.state.load().revalidation
        if record is None:
            return None
        by_rows = record.unit == "rows"
        return Progress(trigger=record.trigger, unit=record.unit,
                        positions_read=record.position if by_rows else None,
                        positions_total=record.head if by_rows else None,
                        rows_read=record.rows_read, tuples_read=record.tuples_read,
                        confirmed=len(record.confirmed),
                        partitions_done=len(set(record.completed) & record.versions.keys()),
                        partitions_total=len(record.versions), slices=record.slices)

    def capture_set(self) -> tuple[frozenset[str], int]:
        """The keys capture may poll now, and how many were left out as ignored.

        While a pass is under way these are only the keys it confirmed so far,
        whatever started it; otherwise the inventory. The ignore list is removed.
        """
        state = self.state.load()
        keys = state.revalidation.confirmed if state.revalidation is not None else state.repos
        ignore = frozenset(state.ignore)
        allowed = frozenset(k for k in keys if k not in ignore)
        return allowed, len(keys) - len(allowed)

    def known(self) -> frozenset[str]:
        """Keys whose polling state is worth keeping: the inventory, and the keys a
        pass under way confirmed (a repository awaiting re-confirmation keeps its
        ETag, so it costs a 304, not a full fetch, once the pass confirms it)."""
        state = self.state.load()
        confirmed = state.revalidation.confirmed if state.revalidation is not None else ()
        return frozenset(state.repos).union(confirmed)

    # -- the tick ---------------------------------------------------------------

    def tick(self, *, request: bool = False) -> TickOutcome:
        """One bounded step. ``request`` starts a pass now unless one is under way;
        the pass is labelled with the trigger that was due, if any."""
        state = self.state.load()
        fingerprint = self.seam.export_policy_fingerprint()
        instance = self.store.instance_id
        versions = self._discover()
        now = self.clock()
        record = state.revalidation
        if record is not None:
            reason = self.restart_reason(record, fingerprint, instance, versions)
        else:
            reason = self.trigger(state, fingerprint, instance, versions, now)
            if reason == "age" and derivation_ahead(state, now):
                self.emit("capture.future_stamps", field="derived_at", count=1)
            if reason is None and request:
                reason = "requested"
        if reason is not None:
            self.emit("capture.revalidation_started", trigger=reason, unit=self.unit,
                      prior_inventory=len(state.repos), restarted=record is not None)
            # After the versions: every row they count lies at or before the head.
            head = self.store.head_position()
            tuple_head = self.seam.tuple_head_sync() if self.unit == "tuples" else None
            record = Revalidation(fingerprint=fingerprint, trigger=reason, started_at=now,
                                  prior_size=len(state.repos), store_instance=instance,
                                  head=head, tuple_head=tuple_head, unit=self.unit,
                                  versions={name: str(v) for name, v in versions.items()})
        if record is None:
            return self._extend(state, versions)
        outcome = self._slice(state, record, versions, now)
        outcome.started = reason
        return outcome

    def _extend(self, state: SidecarState, versions: Mapping[str, PartitionVersion]
                ) -> TickOutcome:
        """Read what grown or new partitions hold after their cursors, within the budget.

        A partition that can hold no more rows after its cursor than the budget
        left (its version says how many it gained) is read to the head at once,
        however far behind the cursor is. The others share one window of
        positions from the lowest of their cursors, so however many there are,
        the rows SQLite looks at stay within the window's width.
        """
        outcome = TickOutcome()
        grown = {name: state.partitions.get(name) for name in sorted(versions)
                 if _needs_reading(state.partitions.get(name), versions[name])}
        if not grown:
            return outcome  # unchanged partitions are not reopened
        head = self.store.head_position()  # after the versions (see the pass)
        marks: dict[str, PartitionMark] = {}
        found: set[str] = set()
        reducer = self._reducer
        reducer.unrecognised = 0
        remaining = self.row_budget
        bounds = {name: _rows_after(mark, versions[name]) for name, mark in grown.items()}
        windowed: dict[str, int] = {}
        for name in sorted(grown, key=lambda n: (bounds[n], n)):
            mark = grown[name]
            cursor = mark.cursor if mark else 0
            if bounds[name] > remaining:
                windowed[name] = cursor
                continue
            outcome.rows_read += self._read(name, cursor, head, reducer, found)
            outcome.positions_read += bounds[name]
            remaining -= bounds[name]
            marks[name] = PartitionMark(version=str(versions[name]), cursor=max(cursor, head))
        if windowed:
            low = min(windowed.values())
            until = min(low + remaining, head)
            for name, cursor in windowed.items():
                if cursor >= until:
                    continue  # the window ends before this cursor: a later tick's
                outcome.rows_read += self._read(name, cursor, until, reducer, found)
                marks[name] = PartitionMark(version=str(versions[name]), cursor=until,
                                            caught_up=until >= head)
            outcome.positions_read += max(0, until - low)
            outcome.extension_pending = until < head
        known = set(state.repos)
        added = found - known
        if marks:
            self.state.save(msgspec.structs.replace(
                state, repos=sorted(known | added) if added else state.repos,
                partitions={**state.partitions, **marks}))
        outcome.added = len(added)
        self.emit("capture.inventory_extended", positions_read=outcome.positions_read,
                  rows_read=outcome.rows_read, added=len(added),
                  unrecognised=reducer.unrecognised, budget_exhausted=outcome.extension_pending)
        return outcome

    def _slice(self, state: SidecarState, record: Revalidation,
               versions: Mapping[str, PartitionVersion], now: float) -> TickOutcome:
        confirmed = set(record.confirmed)
        reducer = self._reducer
        reducer.unrecognised = 0
        outcome = TickOutcome()
        if record.unit == "tuples":
            record, complete = self._tuple_slice(record, reducer, confirmed, outcome)
            budget = self.tuple_budget
        else:
            record, complete = self._row_slice(record, reducer, confirmed, outcome)
            budget = self.row_budget
        record = msgspec.structs.replace(
            record, confirmed=sorted(confirmed),
            positions_read=record.positions_read + outcome.positions_read,
            rows_read=record.rows_read + outcome.rows_read,
            tuples_read=record.tuples_read + outcome.tuples_read,
            slices=record.slices + 1, unrecognised=record.unrecognised + reducer.unrecognised)
        if complete:
            marks = self._swap(state, record, now)
            outcome.swapped = True
            # Rows appended during the pass, and partitions that appeared, are next.
            outcome.extension_pending = any(_needs_reading(marks.get(name), version)
                                            for name, version in versions.items())
            return outcome
        self.state.save(msgspec.structs.replace(state, revalidation=record))
        self.emit("capture.revalidation_slice", unit=record.unit,
                  positions_read=outcome.positions_read, rows_read=outcome.rows_read,
                  tuples_read=outcome.tuples_read, examined=outcome.examined, budget=budget,
                  partitions_done=len(record.completed),
                  partitions_total=len(record.versions), confirmed=len(confirmed))
        outcome.revalidating = True
        return outcome

    def _row_slice(self, record: Revalidation, reducer: KeyReducer, keys: set[str],
                   outcome: TickOutcome) -> tuple[Revalidation, bool]:
        """Read the next window of positions of every partition the pass noted."""
        head = record.head or 0
        start = record.position
        until = max(start, min(start + self.row_budget, head))
        for name in sorted(record.versions):
            outcome.rows_read += self._read(name, start, until, reducer, keys)
        outcome.positions_read = outcome.examined = until - start
        complete = until >= head
        completed = sorted(record.versions) if complete else []
        return msgspec.structs.replace(record, position=until, completed=completed), complete

    def _tuple_slice(self, record: Revalidation, reducer: KeyReducer, keys: set[str],
                     outcome: TickOutcome) -> tuple[Revalidation, bool]:
        """Read the next window of tuple ids, no wider than the tuple budget, of
        every partition the pass noted at once.

        The window's width is what it costs, withheld tuples included: the seam
        keeps those back inside SQLite, where they still take time, so a budget
        counted in the tuples it lets out would not bound the work. Tuple ids are
        one sequence over every partition, and every tuple that appeared after
        the pass started (a new partition's included) lies past the head it
        noted, so one window over all partitions reads exactly the noted ones.
        """
        # A record written before the head was noted notes it now.
        head = record.tuple_head
        if head is None:
            head = self.seam.tuple_head_sync()
        pending = [name for name in sorted(record.versions) if name not in record.completed]
        # Cursors differ only in a record of a release that read partition by partition.
        start = min((record.cursors.get(name, 0) for name in pending), default=head)
        until = max(start, min(start + self.tuple_budget, head))
        outcome.tuples_read = self._read_tuples(start, until, set(pending), reducer, keys)
        outcome.examined = until - start
        complete = until >= head
        cursors = {**record.cursors, **dict.fromkeys(pending, until)}
        completed = sorted(record.versions) if complete else record.completed
        record = msgspec.structs.replace(record, cursors=cursors, tuple_head=head,
                                         completed=completed)
        return record, complete

    def _swap(self, state: SidecarState, record: Revalidation, now: float
              ) -> dict[str, PartitionMark]:
        """Swap the pass's keys in as the inventory; returns the new partition marks."""
        # Every row the noted versions count lies at or before the noted head; a
        # partition that appeared during the pass has no mark, so the next
        # ordinary tick reads it from its beginning.
        marks = {name: PartitionMark(version=version, cursor=record.head or 0)
                 for name, version in record.versions.items()}
        self.state.save(msgspec.structs.replace(
            state, repos=record.confirmed, partitions=marks,
            policy_fingerprint=record.fingerprint, store_instance=record.store_instance,
            derived_at=now, revalidation=None))
        before, after = set(state.repos), set(record.confirmed)
        self.emit("capture.revalidation_completed", unit=record.unit,
                  positions_read=record.positions_read, rows_read=record.rows_read,
                  tuples_read=record.tuples_read, confirmed=len(after),
                  retired=len(before - after), admitted=len(after - before),
                  slices=record.slices, unrecognised=record.unrecognised)
        return marks

    def _read(self, partition: str, cursor: int, until: int, reducer: KeyReducer,
              keys: set[str]) -> int:
        """Stream ``partition``'s permitted rows in ``(cursor, until]`` into ``keys``.

        Rows are taken from the stream a small chunk at a time and each chunk is
        reduced to its distinct remotes at once (consecutive rows of a session
        share one), so the per-row work stays in C. Returns the rows read.
        """
        if until <= cursor:
            return 0
        rows = self.seam.read_rows_since_sync(partition, cursor, _COLUMNS, until=until)
        count = 0
        try:
            while chunk := list(islice(rows, CHUNK_ROWS)):
                count += len(chunk)
                for remote, seen in Counter(map(_remote, chunk)).items():
                    if remote:
                        key = reducer.key(remote, seen)
                        if key is not None:
                            keys.add(key)
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()  # release the read transaction if reducing failed part way
        return count

    def _read_tuples(self, cursor: int, until: int, partitions: set[str],
                     reducer: KeyReducer, keys: set[str]) -> int:
        """Read the permitted tuples of ``partitions`` with ids in ``(cursor, until]``
        into ``keys``; returns how many the seam let out of those partitions (the
        capture partition's own, and any the pass did not note, are passed over)."""
        if until <= cursor:
            return 0
        count = 0
        for _, partition, remote in self.seam.read_tuples_since_sync(
                None, cursor, _TUPLE_COLUMNS, until=until):
            if partition not in partitions:
                continue
            count += 1
            if remote:
                key = reducer.key(remote)
                if key is not None:
                    keys.add(key)
        return count


def derivation_ahead(state: SidecarState, now: float) -> bool:
    """The last derivation is stamped further in the future than a clock may drift."""
    return state.derived_at is not None and ahead(state.derived_at, now)


def _regressed(current: PartitionVersion | None, tracked: str) -> bool:
    return current is None or not current.grew_from(PartitionVersion.parse(tracked))


def _needs_reading(mark: PartitionMark | None, version: PartitionVersion) -> bool:
    return mark is None or not mark.caught_up or mark.version != str(version)


def _rows_after(mark: PartitionMark | None, version: PartitionVersion) -> int:
    """At most how many rows ``version`` holds after ``mark``'s cursor (no row read).

    A caught-up mark's version counts every row at or before its cursor, so a
    growth from it adds the only rows after; otherwise any row may be.
    """
    if mark is not None and mark.caught_up:
        tracked = PartitionVersion.parse(mark.version)
        if version.grew_from(tracked):
            return version.row_count - tracked.row_count
    return version.row_count
