"""The work-item ledger: one portable JSON record per item, and an index over them.

Layout under the ledger folder (``<root>/ledger``)::

    portable/<slug>.json   one record per work item (the truth; see docs/ledger.md)
    index.sqlite3          a summary of every record, re-derivable, never trusted
    .lock                  serialises writers across processes

Records and their encoding are in :mod:`hostcore.workitems.records`, the index in
:mod:`hostcore.workitems.index`. Every change is one atomic write of the record.
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
from hostcore.files import atomic_write, file_lock
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
    decode_record,
    encode_record,
    slug_for,
    without_future,
)

__all__ = [
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

log = logging.getLogger("hostcore.workitems.ledger")

# A stamp past the horizon reads as unparsable: "" sorts first. (The ORDER BY's
# parameter follows the WHERE clause's two.)
_HORIZON_ORDER = "CASE WHEN absent_since > ? THEN '' ELSE absent_since END, ref"


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
                                 on_event=on_event)
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
        """The record of ``ref``; ``None`` if there is none; :class:`RecordError` if
        the file is malformed or belongs to another ref."""
        path = self.path_for(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        self.counters.reads += 1
        record = decode_record(data, what=str(path))
        if record.ref != ref:
            raise RecordError(f"{path}: $.ref: names {record.ref[:80]!r}, not {ref[:80]!r}")
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
            atomic_write(path, data)
            self.counters.writes += 1
            stat = path.stat()
            self.index.recorded(path.name[:-5], stored, stat.st_size, stat.st_mtime_ns)

    def update(self, ref: str,
               change: Callable[[PortableRecord], PortableRecord | None]) -> PortableRecord | None:
        """Apply ``change`` to the record of ``ref`` (a new empty one if absent) and
        write the result, unless ``change`` returns ``None`` (nothing to write).
        A malformed record raises :class:`RecordError` and is left as it is."""
        with self._locked():  # read, change and write as one step across processes
            record = self.read(ref) or PortableRecord(ref=ref)
            changed = change(record)
            if changed is not None:
                self.write(changed)
            return changed

    def iter_records(self) -> Iterator[tuple[str, PortableRecord]]:
        """Every well-formed record as ``(ref, record)``, in file-name order.

        Reads every file; a malformed one is skipped with a debug line.
        """
        if not self.portable.is_dir():
            return
        for name in sorted(os.listdir(self.portable)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = self.portable / name
            try:
                record = self._read_file(path)
            except (OSError, RecordError) as exc:
                log.debug("ledger: skipping %s: %s", name, exc)
                continue
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
        every index answer (see the module docstring).
        """
        return self.index.read(lambda db: {
            str(ref): str(member) for ref, member in
            db.execute("SELECT ref, decision FROM entries WHERE decision IS NOT NULL")})

    def entry(self, ref: str) -> IndexEntry | None:
        rows = self.index.entries("slug = ?", (slug_for(ref),))
        return rows[0] if rows and rows[0].ref == ref else None

    def status(self) -> dict[str, int]:
        """Counts for ``hostcore status``: records, ended, tracked, ledger-only, malformed."""

        def counts(db: sqlite3.Connection) -> dict[str, int]:
            by_class = dict(db.execute("SELECT class, COUNT(*) FROM entries GROUP BY class"))
            return {
                "records": sum(by_class.values()),
                "ended": by_class.get("ended", 0),
                "tracked": by_class.get("tracked", 0),
                "ledger_only": by_class.get("ledger_only", 0),
                "malformed": int(db.execute("SELECT COUNT(*) FROM malformed").fetchone()[0]),
            }

        return self.index.read(counts)

    def rebuild_index(self, reason: str = "requested") -> int:
        """Delete the index and derive it again from every record; returns records indexed."""
        return self.index.rebuild(reason)

    def close(self) -> None:
        self.index.close()

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
        """Drop the ``poll`` section of ``ref``; the rest of the record stays."""

        def drop(record: PortableRecord) -> PortableRecord | None:
            if record.poll is None:
                return None
            return msgspec.structs.replace(record, poll=None)

        self.ledger.update(ref, drop)
