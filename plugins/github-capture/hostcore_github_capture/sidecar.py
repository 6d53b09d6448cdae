"""The inventory sidecar: ordinary ticks, revalidation triggers, bounded passes, the swap.

Every tick starts from persisted state and three cheap reads: the export policy
fingerprint, the store's partition versions, the clock. From them it decides,
afresh each time (nothing about a trigger is stored but the pass it started):

* **revalidate** when the fingerprint differs from the one the inventory was
  derived under (none persisted included), when a tracked partition regressed
  (its version is not a growth of the tracked one, or it is gone), or when the
  last completed derivation is older than :data:`MAX_DERIVATION_AGE_SECONDS`;
* otherwise **extend**: read only the rows after each grown or new partition's
  cursor. A tick where nothing changed opens no partition and reads no row.

A pass re-reads every partition from the start through the export seam, so it
sees exactly what the live policy lets out. It reads at most ``row_budget``
rows per tick across partitions, reducing each row to a key as it arrives, and
persists its progress (confirmed keys, cursors, versions, completed partitions)
after every slice, so a later tick or a restarted process carries on
mid-partition. A fingerprint change or a regression of a partition the pass has
already read restarts it. When every discovered partition is complete, one
atomic write swaps the inventory in, stamps the fingerprint and the time and
clears the pass. Until then capture sees only the keys the pass confirmed.

A pass over ``R`` permitted rows under a budget of ``B`` takes ``R // B + 1``
ticks: every tick but the last reads exactly ``B`` rows, and a partition is
complete when a read returns fewer rows than it asked for.

A pass may instead read by **tuples** (``unit="tuples"``): the distinct
(directory, source, remote) of each partition, which the store keeps as rows
come and go, through :meth:`ExportSeam.read_tuples_since_sync` under the same
policy verdicts, at most ``tuple_budget`` a tick. It confirms exactly the keys
a row pass would, in ``T // B + 1`` ticks for ``T`` tuples (a handful where a
row pass takes dozens). A partition's cursor after the swap is the store's
head position noted when the pass first read it, and its tracked version the
one read then, so the rows appended meanwhile are read by the next ordinary
tick like any growth.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any, Protocol

import msgspec

from hostcore.evidence.store import PartitionVersion
from hostcore_github_capture.remotes import KeyReducer
from hostcore_github_capture.state import (
    PartitionMark,
    Revalidation,
    SidecarState,
    StateFile,
)

# Rows one tick may read from history, across partitions, in a pass or an extension.
REVALIDATION_ROW_BUDGET = 50_000
# Distinct (directory, source, remote) tuples one tick may read in a pass by tuples.
REVALIDATION_TUPLE_BUDGET = 50_000
# The backstop for withholding inputs the fingerprint cannot see (ignore dotfiles).
MAX_DERIVATION_AGE_SECONDS = 7 * 24 * 3600.0
# Capture output: stored like evidence, exported through the seam, never inventory input.
CAPTURE_PARTITION = "github_events"

TRIGGERS = ("initial", "fingerprint", "regressed", "age", "requested")
UNITS = ("rows", "tuples")
_COLUMNS = ("git_remote",)
# Rows taken from the seam's stream at a time: bounds what a read holds at once.
CHUNK_ROWS = 1024
_remote = itemgetter(1)


class StoreLike(Protocol):
    def partitions(self) -> Mapping[str, PartitionVersion]: ...

    def head_position(self) -> int: ...


class SeamLike(Protocol):
    def export_policy_fingerprint(self) -> str: ...

    def read_rows_since_sync(self, partition: str | None, cursor: int,
                             columns: Iterable[str]) -> Iterator[tuple[Any, ...]]: ...

    def read_tuples_since_sync(self, partition: str | None, cursor: int,
                               columns: Iterable[str]) -> Iterator[tuple[Any, ...]]: ...


class TickOutcome(msgspec.Struct, kw_only=True):
    """What one sidecar tick did (counts only)."""

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
    """Where a pass stands, for status and the ``revalidate`` progress line."""

    trigger: str
    unit: str
    rows_read: int
    tuples_read: int
    confirmed: int
    partitions_done: int
    partitions_total: int
    slices: int


class Sidecar:
    """Keeps ``sidecar.json`` in step with what the export seam lets out.

    :param store: anything with ``partitions()`` and ``head_position()`` (the host's store).
    :param seam: the export seam (``export_policy_fingerprint``, ``read_rows_since_sync``,
        ``read_tuples_since_sync``).
    :param state: the ``sidecar.json`` file.
    :param emit: the host's ``emit``.
    :param clock: seconds since the epoch (tests inject one).
    :param row_budget: rows per tick (tests inject small values).
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
        unit: str = "rows",
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

    def trigger(self, state: SidecarState, fingerprint: str,
                versions: Mapping[str, PartitionVersion], now: float) -> str | None:
        """The reason a pass must start now, or ``None`` (when no pass is under way)."""
        if state.policy_fingerprint is None:
            fresh = state.derived_at is None and not state.repos and not state.partitions
            return "initial" if fresh else "fingerprint"
        if state.policy_fingerprint != fingerprint:
            return "fingerprint"
        for name, mark in state.partitions.items():
            if _regressed(versions.get(name), mark.version):
                return "regressed"
        if state.derived_at is None or now - state.derived_at > MAX_DERIVATION_AGE_SECONDS:
            return "age"
        return None

    @staticmethod
    def restart_reason(record: Revalidation, fingerprint: str,
                       versions: Mapping[str, PartitionVersion]) -> str | None:
        """Why the pass under way can no longer complete as it is, or ``None``."""
        if record.fingerprint != fingerprint:
            return "fingerprint"
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
        if self.trigger(state, fingerprint, versions, self.clock()) is not None:
            return True
        return any(_needs_reading(state.partitions.get(n), v) for n, v in versions.items())

    def progress(self) -> Progress | None:
        """The pass under way, as counts; ``None`` when there is none."""
        record = self.state.load().revalidation
        if record is None:
            return None
        versions = self._discover()
        done = len(set(record.completed) & versions.keys())
        return Progress(trigger=record.trigger, unit=record.unit, rows_read=record.rows_read,
                        tuples_read=record.tuples_read,
                        confirmed=len(record.confirmed), partitions_done=done,
                        partitions_total=len(versions), slices=record.slices)

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
        """One bounded step. ``request`` starts a pass now unless one is under way."""
        state = self.state.load()
        fingerprint = self.seam.export_policy_fingerprint()
        versions = self._discover()
        now = self.clock()
        record = state.revalidation
        if record is not None:
            reason = self.restart_reason(record, fingerprint, versions)
        else:
            reason = "requested" if request else self.trigger(state, fingerprint, versions, now)
        if reason is not None:
            self.emit("capture.revalidation_started", trigger=reason, unit=self.unit,
                      prior_inventory=len(state.repos), restarted=record is not None)
            record = Revalidation(fingerprint=fingerprint, trigger=reason, started_at=now,
                                  prior_size=len(state.repos), unit=self.unit)
        if record is None:
            return self._extend(state, versions)
        outcome = self._slice(state, record, versions, now)
        outcome.started = reason
        return outcome

    def _extend(self, state: SidecarState, versions: Mapping[str, PartitionVersion]
                ) -> TickOutcome:
        outcome = TickOutcome()
        marks: dict[str, PartitionMark] = {}
        found: set[str] = set()
        reducer = self._reducer
        reducer.unrecognised = 0
        remaining = self.row_budget
        for name in sorted(versions):
            mark = state.partitions.get(name)
            version = versions[name]
            if not _needs_reading(mark, version):
                continue  # unchanged: not reopened
            if remaining == 0:
                outcome.extension_pending = True
                break
            read, cursor, exhausted = self._read(name, mark.cursor if mark else 0, remaining,
                                                 reducer, found)
            remaining -= read
            outcome.rows_read += read
            marks[name] = PartitionMark(version=str(version), cursor=cursor, caught_up=exhausted)
            outcome.extension_pending |= not exhausted
        if not marks:
            return outcome
        known = set(state.repos)
        added = found - known
        self.state.save(msgspec.structs.replace(
            state, repos=sorted(known | added) if added else state.repos,
            partitions={**state.partitions, **marks}))
        outcome.added = len(added)
        if outcome.rows_read:
            self.emit("capture.inventory_extended", rows_read=outcome.rows_read,
                      added=len(added), unrecognised=reducer.unrecognised,
                      budget_exhausted=outcome.extension_pending)
        return outcome

    def _slice(self, state: SidecarState, record: Revalidation,
               versions: Mapping[str, PartitionVersion], now: float) -> TickOutcome:
        confirmed = set(record.confirmed)
        cursors = dict(record.cursors)
        seen = dict(record.versions)
        snapshots = dict(record.snapshots)
        completed = set(record.completed)
        reducer = self._reducer
        reducer.unrecognised = 0
        by_tuples = record.unit == "tuples"
        budget = self.tuple_budget if by_tuples else self.row_budget
        remaining = budget
        read_total = 0
        for name in sorted(versions):
            if name in completed:
                continue
            if remaining == 0:
                break
            if by_tuples:
                if name not in snapshots:
                    # Every row up to here is covered by the tuples read from now on.
                    seen[name] = str(versions[name])
                    snapshots[name] = self.store.head_position()
                read, cursors[name], exhausted = self._read_tuples(
                    name, cursors.get(name, 0), remaining, reducer, confirmed)
            else:
                seen[name] = str(versions[name])
                read, cursors[name], exhausted = self._read(
                    name, cursors.get(name, 0), remaining, reducer, confirmed)
            remaining -= read
            read_total += read
            if exhausted:
                completed.add(name)
        rows, tuples = (0, read_total) if by_tuples else (read_total, 0)
        record = msgspec.structs.replace(
            record, confirmed=sorted(confirmed), cursors=cursors, versions=seen,
            snapshots=snapshots, completed=sorted(completed),
            rows_read=record.rows_read + rows, tuples_read=record.tuples_read + tuples,
            slices=record.slices + 1, unrecognised=record.unrecognised + reducer.unrecognised)
        if versions.keys() <= completed:
            self._swap(state, record, versions, now)
            return TickOutcome(rows_read=rows, tuples_read=tuples, swapped=True)
        self.state.save(msgspec.structs.replace(state, revalidation=record))
        self.emit("capture.revalidation_slice", unit=record.unit, rows_read=rows,
                  tuples_read=tuples, budget=budget, partitions_done=len(completed),
                  partitions_total=len(versions), confirmed=len(confirmed))
        return TickOutcome(rows_read=rows, tuples_read=tuples, revalidating=True)

    def _swap(self, state: SidecarState, record: Revalidation,
              versions: Mapping[str, PartitionVersion], now: float) -> None:
        cursors = record.snapshots if record.unit == "tuples" else record.cursors
        marks = {name: PartitionMark(version=record.versions[name], cursor=cursors.get(name, 0))
                 for name in versions}
        self.state.save(msgspec.structs.replace(
            state, repos=record.confirmed, partitions=marks,
            policy_fingerprint=record.fingerprint, derived_at=now, revalidation=None))
        before, after = set(state.repos), set(record.confirmed)
        self.emit("capture.revalidation_completed", unit=record.unit,
                  rows_read=record.rows_read, tuples_read=record.tuples_read,
                  confirmed=len(after), retired=len(before - after),
                  admitted=len(after - before), slices=record.slices,
                  unrecognised=record.unrecognised)

    def _read(self, partition: str, cursor: int, limit: int, reducer: KeyReducer,
              keys: set[str]) -> tuple[int, int, bool]:
        """Stream up to ``limit`` rows after ``cursor`` into ``keys``.

        Rows are taken from the stream a small chunk at a time and each chunk is
        reduced to its distinct remotes at once (consecutive rows of a session
        share one), so the per-row work stays in C. Returns (rows read, last
        position read, whether the partition ended).
        """
        rows = self.seam.read_rows_since_sync(partition, cursor, _COLUMNS)
        count = 0
        try:
            while count < limit:
                chunk = list(islice(rows, min(CHUNK_ROWS, limit - count)))
                if not chunk:
                    return count, cursor, True
                count += len(chunk)
                cursor = chunk[-1][0]
                for remote, seen in Counter(map(_remote, chunk)).items():
                    if remote:
                        key = reducer.key(remote, seen)
                        if key is not None:
                            keys.add(key)
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()  # release the read transaction when the budget stops early
        return count, cursor, False


    def _read_tuples(self, partition: str, cursor: int, limit: int, reducer: KeyReducer,
                     keys: set[str]) -> tuple[int, int, bool]:
        """Read up to ``limit`` distinct tuples after tuple id ``cursor`` into ``keys``.

        Returns (tuples read, last tuple id read, whether the partition ended).
        """
        found = self.seam.read_tuples_since_sync(partition, cursor, _COLUMNS)
        count = 0
        try:
            for tuple_id, remote in found:
                count += 1
                cursor = tuple_id
                if remote:
                    key = reducer.key(remote)
                    if key is not None:
                        keys.add(key)
                if count == limit:
                    return count, cursor, False
        finally:
            close = getattr(found, "close", None)
            if close is not None:
                close()
        return count, cursor, True


def _regressed(current: PartitionVersion | None, tracked: str) -> bool:
    return current is None or not current.grew_from(PartitionVersion.parse(tracked))


def _needs_reading(mark: PartitionMark | None, version: PartitionVersion) -> bool:
    return mark is None or not mark.caught_up or mark.version != str(version)
