"""The work-item ledger: one portable JSON record per item, and an index over them.

Layout under the ledger folder (``<root>/ledger``)::

    portable/<slug>.json   one record per work item (the truth; see docs/ledger.md)
    index.sqlite3          a summary of every record, re-derivable, never trusted
    archive.sqlite3        ended records moved out of portable/ (the truth for them)
    .lock                  serialises writers across processes

Records and their encoding are in :mod:`hostcore.workitems.records`, the index in
:mod:`hostcore.workitems.index`, the archive in :mod:`hostcore.workitems.archive`.
Every change is one atomic write of the record. A record lives in ``portable/`` or
in the archive; where both hold one (a move killed half way) the live file wins.
A :class:`Ledger` may be used from several threads of one process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from hostcore.errors import RecordError
from hostcore.files import atomic_write, file_lock, fsync_dir
from hostcore.workitems.archive import Archive, Archived, ArchiveUnreadable
from hostcore.workitems.index import IndexEntry, LedgerCounters, LedgerIndex
from hostcore.workitems.records import (
    DECISIONS,
    ENDED,
    POLL,
    EndedStamp,
    GiveUp,
    PollSection,
    PortableRecord,
    absent_since_of,
    decision_member,
    decode_record,
    encode_record,
    slug_for,
    without_future,
)

__all__ = [
    "ArchiveUnreadable",
    "EndedStamp",
    "GiveUp",
    "IndexEntry",
    "Ledger",
    "PollSection",
    "PollState",
    "PortableRecord",
    "decode_record",
    "encode_record",
]

ARCHIVE_FILE = "archive.sqlite3"
# Left by a write that could not ask the archive whether it holds the record: its live
# files may shadow copies that ``pending`` does not list, so the next pass checks all.
ARCHIVE_UNCHECKED_FILE = ".archive-unchecked"

log = logging.getLogger("hostcore.workitems.ledger")

# A stamp past the horizon reads as unparsable: "" sorts first. (The ORDER BY's
# parameter follows the WHERE clause's two.)
_HORIZON_ORDER = "CASE WHEN absent_since > ? THEN '' ELSE absent_since END, ref"

# Each scope key of the unstamped records, one index seek apiece: the query skips from
# a key to the next along ``entries_unstamped_scope``, so it costs the keys, not the rows.
_UNSTAMPED_SCOPES = """
WITH RECURSIVE keys(scope) AS (
    SELECT MIN(scope) FROM entries WHERE class != 'ended'
    UNION ALL
    SELECT (SELECT MIN(scope) FROM entries WHERE class != 'ended' AND scope > keys.scope)
    FROM keys WHERE keys.scope IS NOT NULL
)
SELECT scope, (SELECT ref FROM entries WHERE class != 'ended' AND scope = keys.scope LIMIT 1)
FROM keys WHERE scope IS NOT NULL
"""


class ArchivePass(msgspec.Struct, kw_only=True):
    """What one :meth:`Ledger.archive_ended` did (counts only: they reach telemetry)."""

    archived: int = 0
    skipped: int = 0


class Ledger:
    """The portable records under ``directory`` (``<root>/ledger``) and their index.

    :param on_event: called as ``on_event(name, **counts)`` for the ledger's own
        telemetry (``ledger.index_rebuilt``); the host wires it to ``host.emit``.
    """

    def __init__(self, directory: Path,
                 on_event: Callable[..., object] | None = None, *,
                 read_only: bool = False) -> None:
        self.directory = Path(directory)
        self.read_only = read_only
        self.portable = self.directory / "portable"
        self.index_path = self.directory / "index.sqlite3"
        self.counters = LedgerCounters()
        self.index = LedgerIndex(self.portable, None if read_only else self.index_path,
                                 read_file=self._read_file,
                                 locked=self._locked, counters=self.counters,
                                 on_event=on_event, read_from=self.index_path)
        self.archive = Archive(self.directory / ARCHIVE_FILE, read_only=read_only)
        self._unchecked = self.directory / ARCHIVE_UNCHECKED_FILE
        # Re-entrant per process (a second flock on a new descriptor would wait
        # for the first forever); the flock itself serialises processes.
        self._thread_lock = threading.RLock()
        self._lock_depth = 0

    # -- records -------------------------------------------------------------------

    def path_for(self, ref: str) -> Path:
        """The record file of ``ref``; always directly inside ``portable/``."""
        path = self.portable / f"{slug_for(ref)}.json"
        if path.parent != self.portable:  # slug_for never yields a separator; be sure
            raise RecordError(f"work-item ref {ref[:80]!r} does not map inside the ledger")
        return path

    def read(self, ref: str) -> PortableRecord | None:
        """The record of ``ref`` (live, else archived); ``None`` if there is none;
        :class:`RecordError` if it is malformed or belongs to another ref, and
        :class:`ArchiveUnreadable` (one) if it has no live file and the archive,
        which might hold it, cannot be read."""
        path = self.path_for(ref)
        try:
            data, what = path.read_bytes(), str(path)
        except FileNotFoundError:
            kept = self.archive.get(ref)
            if kept is None:
                return None
            data, what = kept, f"{self.archive.path} ({path.name})"
        self.counters.reads += 1
        record = decode_record(data, what=what)
        if record.ref != ref:
            raise RecordError(f"{what}: $.ref: names {record.ref[:80]!r}, not {ref[:80]!r}")
        return record

    def write(self, record: PortableRecord) -> None:
        """Write ``record`` (one atomic write) and update its index row.

        A record with a decision section is indexed as it reads back from the
        file, exactly as a rebuild would index it (JSON turns int keys into
        strings, for one); one that would not read back raises
        :class:`RecordError` before anything is written.
        """
        if self.read_only:
            raise RecordError(f"{self.directory}: ledger opened read-only")
        path = self.path_for(record.ref)
        data = encode_record(record)
        stored = decode_record(data, what=str(path)) if record.sections & DECISIONS else record
        with self._locked():
            self.index.fresh()  # the meta written after must describe a synced index
            archived = self._archived(record.ref)
            if archived:
                # Listed pending first, so a kill before the copy is dropped leaves a
                # shadow that counts know of; the live file is the newer version.
                self.archive.mark_pending(record.ref)
            atomic_write(path, data)
            self.counters.writes += 1
            stat = path.stat()
            self.index.recorded(path.name[:-5], stored, stat.st_size, stat.st_mtime_ns)
            if archived:
                self.archive.discard(record.ref)

    def _archived(self, ref: str) -> bool:
        """Whether the archive holds a copy of ``ref``; an archive that cannot be read
        holds none as far as writes go (the live file wins every read anyway)."""
        try:
            return self.archive.holds(ref)
        except RecordError:
            log.debug("ledger: the archive cannot be read", exc_info=True)
            if not self._unchecked.exists():
                atomic_write(self._unchecked, b"")
            return False

    def update(self, ref: str,
               change: Callable[[PortableRecord], PortableRecord | None]) -> PortableRecord | None:
        """Apply ``change`` to the record of ``ref`` (a new empty one if absent) and
        write the result, unless ``change`` returns ``None`` (nothing to write).
        A malformed record raises :class:`RecordError` and is left as it is."""
        with self._locked():  # read, change and write as one step across processes
            try:
                record = self.read(ref) or PortableRecord(ref=ref)
            except ArchiveUnreadable:
                # No live file, and an archive that cannot say: write a new record rather
                # than stop (the archive is reported by status; its copy is kept).
                log.warning("ledger: the archive cannot be read; a record is written anew")
                record = PortableRecord(ref=ref)
            changed = change(record)
            if changed is not None:
                self.write(changed)  # an archived record moves back to portable/
            return changed

    def iter_records(self) -> Iterator[tuple[str, PortableRecord]]:
        """Every well-formed record as ``(ref, record)``: the live ones in file-name
        order, then the archived ones (those without a live file) in ref order.

        Reads every file and every archived record; a malformed one is skipped with
        a debug line.
        """
        names = sorted(os.listdir(self.portable)) if self.portable.is_dir() else []
        live = set(names)
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = self.portable / name
            try:
                record = self._read_file(path)
            except (OSError, RecordError) as exc:
                log.debug("ledger: skipping %s: %s", name, exc)
                continue
            yield record.ref, record
        for ref, data in self.archive.records():
            if f"{slug_for(ref)}.json" in live:
                continue  # shadowed: the live file wins
            try:
                record = decode_record(data, what=f"{self.archive.path}")
            except RecordError as exc:
                log.debug("ledger: skipping an archived record: %s", exc)
                continue
            self.counters.reads += 1
            yield record.ref, record

    def _read_file(self, path: Path) -> PortableRecord:
        data = path.read_bytes()
        self.counters.reads += 1
        record = decode_record(data, what=str(path))
        if f"{slug_for(record.ref)}.json" != path.name:
            raise RecordError(f"{path}: $.ref: {record.ref[:80]!r} belongs in another file")
        return record

    # -- index queries -------------------------------------------------------------

    def entries(self, *, with_bits: int = 0, without_bits: int = 0) -> list[IndexEntry]:
        """Index entries having all of ``with_bits`` and none of ``without_bits``."""
        return self.index.entries("(sections & ?) = ? AND (sections & ?) = 0",
                                  (with_bits, with_bits, without_bits))

    def tracked(self) -> list[IndexEntry]:
        """Unstamped records with a session, control, graph or collaborators section."""
        return self.index.entries("class = 'tracked'", ())

    def ledger_only_due(self, cutoff: str, horizon: str = "") -> list[IndexEntry]:
        """Unstamped poll-only records whose ``absent_since`` is at or before ``cutoff``
        (an unparsable pair sorts as ``""``: due), longest-absent first, then by ref.

        With ``horizon``, an ``absent_since`` later than it reads as unparsable: due,
        and first. (The index keeps the later stamp only; the caller re-reads the
        record and judges each stamp on its own.)
        """
        if not horizon:
            return self.index.entries("class = 'ledger_only' AND absent_since <= ?", (cutoff,),
                                      order="absent_since, ref")
        return self.index.entries(
            "class = 'ledger_only' AND (absent_since <= ? OR absent_since > ?)",
            (cutoff, horizon, horizon), order=_HORIZON_ORDER)

    def stamped_and_polled(self) -> list[IndexEntry]:
        """Records with both ``ended`` and ``poll``: a close path that stopped between
        its stamp and its forget (the process was killed), or one under way now."""
        return self.entries(with_bits=POLL | ENDED)

    def unstamped(self) -> list[IndexEntry]:
        """Every record without an ``ended`` stamp, whoever owns it."""
        return self.entries(without_bits=ENDED)

    def decision_members(self) -> dict[str, str]:
        """``{ref: decision_member(record)}`` for every well-formed record carrying a decision.

        One index query: each member was computed when the index last took in
        that version of the file (its size and mtime), so an unchanged ledger reads
        no record, and a changed one reads only the changed files. As fresh as
        every index answer (see the module docstring). Archived records add the
        members kept beside them, unless a live record of the same ref wins.
        """
        members = self.index.read(lambda db: {
            str(ref): str(member) for ref, member in
            db.execute("SELECT ref, decision FROM entries WHERE decision IS NOT NULL")})
        shadowed = self._shadowed()
        for ref, member in self.archive.decision_members():
            if ref not in members and ref not in shadowed:
                members[ref] = member
        return members

    def _shadowed(self) -> set[str]:
        """The archived refs that also have a live file (which wins): only pending
        refs can (see :mod:`hostcore.workitems.archive`), unless a write could not
        read the archive; then every live ref is looked up."""
        if self._unchecked.exists():
            return self.archive.holding(self._live_refs())
        return {ref for ref in self.archive.pending() if self.path_for(ref).exists()}

    def _live_refs(self) -> list[str]:
        return self.index.read(lambda db: [
            str(ref) for (ref,) in db.execute("SELECT ref FROM entries")])

    def unstamped_scopes(self) -> list[tuple[str, str]]:
        """``(scope key, a ref)`` for each scope key (:func:`~hostcore.workitems.index.scope_key`)
        of the unstamped records: one query, costing the keys, not the records."""
        return self.index.read(lambda db: [
            (str(key), str(ref)) for key, ref in db.execute(_UNSTAMPED_SCOPES)])

    def unstamped_in(self, key: str, absent_before: str | None = None) -> list[IndexEntry]:
        """The unstamped records of scope key ``key``, by ref; with ``absent_before``,
        only those whose ``absent_since`` is earlier (one index range)."""
        if absent_before is None:
            return self.index.entries("class != 'ended' AND scope = ?", (key,))
        return self.index.entries("class != 'ended' AND scope = ? AND absent_since < ?",
                                  (key, absent_before))

    def entry(self, ref: str) -> IndexEntry | None:
        rows = self.index.entries("slug = ?", (slug_for(ref),))
        return rows[0] if rows and rows[0].ref == ref else None

    def status(self) -> dict[str, int]:
        """Counts for ``hostcore status``: records, ended, tracked, ledger-only,
        malformed, archived (records and ended include the archived ones; a live
        file and its archived copy count once). Index queries, the archive's kept
        count and its few pending refs: no record is read. An archive that cannot be read is counted
        as ``archive_unreadable: 1`` and its records left out."""

        def counts(db: sqlite3.Connection) -> dict[str, int]:
            by_class = dict(db.execute("SELECT class, COUNT(*) FROM entries GROUP BY class"))
            return {
                "records": sum(by_class.values()),
                "ended": by_class.get("ended", 0),
                "tracked": by_class.get("tracked", 0),
                "ledger_only": by_class.get("ledger_only", 0),
                "malformed": int(db.execute("SELECT COUNT(*) FROM malformed").fetchone()[0]),
            }

        report = self.index.read(counts)
        try:
            archived = self.archive.count()
            if archived:
                archived -= len(self._shadowed())
        except RecordError:
            log.info("ledger: the archive cannot be read; status leaves it out")
            return {**report, "archived": 0, "archive_unreadable": 1}
        report["records"] += archived
        report["ended"] += archived
        report["archived"] = archived
        return report

    def archive_ended(self, ended_before: str, limit: int | None = None) -> ArchivePass:
        """Move ended records (stamped, ``poll`` forgotten) whose ``ended.at`` is at
        or before ``ended_before`` into the archive, oldest first, at most ``limit``.

        Crash-safe in two steps under the ledger lock: one durable commit of the
        records' exact bytes into the archive, their refs listed pending, then each
        live file is unlinked if it is still the version copied, the folder
        fsynced, and the refs settled. Killed after the commit, a file and its copy
        both exist with the same bytes: the live one wins every read, counts take
        it once, and the next pass first finishes what is pending. A record that
        changed since it was indexed, or that no longer reads as ended, is skipped
        (counted) and left live.
        """
        if self.read_only:
            raise RecordError(f"{self.directory}: ledger opened read-only")
        done = ArchivePass()
        with self._locked():
            if self._unchecked.exists():
                # Records were written while the archive could not be read: list the
                # copies their live files shadow, so the pass below settles them.
                self.archive.mark_pending(*self.archive.holding(self._live_refs()))
                self._unchecked.unlink()
            self._settle_pending()
            rows = self.index.read(lambda db: db.execute(
                "SELECT slug, ref, size, mtime_ns FROM entries WHERE class = 'ended' "
                "AND (sections & ?) = 0 AND ended_at <= ? ORDER BY ended_at, ref LIMIT ?",
                (POLL, ended_before, -1 if limit is None else limit)).fetchall())
            moving: list[tuple[Archived, Path, tuple[int, int]]] = []
            for slug, ref, size, mtime_ns in rows:
                path = self.portable / f"{slug}.json"
                copied = self._archivable(path, str(ref), (int(size), int(mtime_ns)))
                if copied is None:
                    done.skipped += 1
                    continue
                moving.append((copied, path, (int(size), int(mtime_ns))))
            if not moving:
                return done
            self.archive.put([copied for copied, _, _ in moving])
            gone: list[str] = []
            for _, path, stamp in moving:
                if _stamp_of(path) != stamp:  # rewritten meanwhile: it stays live
                    done.skipped += 1
                    continue
                os.unlink(path)
                gone.append(path.name[:-5])
            fsync_dir(self.portable)
            self.index.removed(gone)
            done.archived = len(gone)
            moved = {f"{slug}.json" for slug in gone}
            self.archive.settle([copied.ref for copied, path, _ in moving
                                 if path.name in moved])
        return done

    def _settle_pending(self) -> None:
        """Finish what a killed process left pending: a live file holding the same
        bytes as its copy is unlinked (the move's second step); a live file that
        differs is the newer version, so the copy is dropped; no live file, nothing
        left to do."""
        for ref in self.archive.pending():
            path = self.path_for(ref)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                self.archive.settle([ref])
                continue
            if data == self.archive.get(ref):
                self.index.fresh()
                os.unlink(path)
                fsync_dir(self.portable)
                self.index.removed([path.name[:-5]])
                self.archive.settle([ref])
            else:
                self.archive.discard(ref)

    def _archivable(self, path: Path, ref: str, stamp: tuple[int, int]) -> Archived | None:
        """The archive's copy of the record file ``path``, if it is still the version
        the index described (``stamp``) and reads as ended with no ``poll``."""
        try:
            if _stamp_of(path) != stamp:
                return None
            data = path.read_bytes()
            if _stamp_of(path) != stamp:
                return None
            record = decode_record(data, what=str(path))
        except (OSError, RecordError) as exc:
            log.debug("ledger: not archiving %s: %s", path.name, exc)
            return None
        self.counters.reads += 1
        if record.ref != ref or record.ended is None or record.poll is not None:
            return None
        return Archived(ref=ref, ended_at=record.ended.at, decision=decision_member(record),
                        data=data)

    def rebuild_index(self, reason: str = "requested") -> int:
        """Delete the index and derive it again from every record; returns records indexed."""
        return self.index.rebuild(reason)

    def close(self) -> None:
        self.index.close()
        self.archive.close()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise index maintenance and record writes across threads and processes."""
        with self._thread_lock:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            lock = (contextlib.nullcontext() if self.read_only
                    else file_lock(self.directory / ".lock"))
            with lock:
                self._lock_depth = 1
                try:
                    yield
                finally:
                    self._lock_depth = 0


def _stamp_of(path: Path) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of ``path``, ``None`` when it is gone."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


class PollState:
    """The ``poll`` sections of a :class:`Ledger`, as the poller reads and writes them.

    Every method that changes a record flushes it at once: one atomic write.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self, ref: str) -> PollSection | None:
        record = self.ledger.read(ref)
        return None if record is None else record.poll

    def absent_since(self, ref: str) -> str:
        """The later of ``lastPolledAt`` and ``closureCheckedAt`` (``""`` when neither
        parses, which the poller reads as due)."""
        return absent_since_of(self.get(ref))

    def note_closure_check(self, ref: str, checked_at: str, horizon: str = "") -> None:
        """Record that the provider was asked about ``ref`` and did not say it closed.

        Writes ``closureCheckedAt`` in one write; with ``horizon``, a
        ``lastPolledAt`` later than it (a wrong clock's) is cleared in the same
        write, and nothing else changes. A record with no ``poll`` section (or none
        at all) is left alone.
        """

        def stamp(record: PortableRecord) -> PortableRecord | None:
            if record.poll is None:
                return None
            poll = msgspec.structs.replace(record.poll, closure_checked_at=checked_at)
            if horizon:
                poll = without_future(poll, horizon)
            return msgspec.structs.replace(record, poll=poll)

        self.ledger.update(ref, stamp)

    def forget(self, ref: str) -> None:
        """Drop the ``poll`` section of ``ref``; the rest of the record stays. An
        ``ended`` stamp without the kind and labels (one an earlier version stamped
        and was stopped before forgetting) takes them from ``poll`` first."""

        def drop(record: PortableRecord) -> PortableRecord | None:
            poll, ended = record.poll, record.ended
            if poll is None:
                return None
            if ended is not None and not ended.kind and not ended.labels:
                ended = msgspec.structs.replace(ended, kind=poll.kind, labels=poll.labels)
            return msgspec.structs.replace(record, poll=None, ended=ended)

        self.ledger.update(ref, drop)
