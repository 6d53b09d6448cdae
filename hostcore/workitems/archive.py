"""The ledger's archive: ended records moved out of ``portable/``, still the truth.

An ended record (``ended`` stamped, ``poll`` forgotten) is read rarely and never
changes unless its item opens again, so once it is old enough the ledger moves it
into one SQLite file, ``archive.sqlite3``: the record's exact JSON bytes keyed by
its ref, with what the ledger answers without decoding it (when it ended, its
decision member). The live folder and its index then hold only the records a
cycle may work on.

Unlike the index this file is not re-derivable: it is written with a rollback
journal and ``synchronous = FULL``, so a committed move survives a power cut, and
it is never deleted or rebuilt when it fails to open: the ledger then archives
nothing and reports the error. The ledger moves a record in two steps (see
:meth:`hostcore.workitems.ledger.Ledger.archive_ended`): it commits the copy here,
then unlinks the live file. Killed between the two, both exist and hold the same
bytes: readers take the live file, counts leave such a copy out, and the next
pass unlinks the live file.

So that counts need not look up every live record here, every ref whose live file
may exist beside its copy is listed in ``pending``, in the same commit that makes
the copy (or, for a record about to be written live again, before that write); a
ref leaves ``pending`` once its live file is gone or its copy is dropped. Only the
pending refs can be shadowed.

One connection serves every thread of a process, one call at a time.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import msgspec

from hostcore.errors import RecordError
from hostcore.workitems.sqlite_files import connect_owned, meta_value

if TYPE_CHECKING:
    from tempfile import TemporaryDirectory

log = logging.getLogger("hostcore.workitems.archive")

ARCHIVE_FORMAT = 1
# SQLite's primary result code for "attempt to write a readonly database".
_SQLITE_READONLY = 8

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    ref TEXT PRIMARY KEY,
    ended_at TEXT NOT NULL,
    decision TEXT,
    data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE pending (ref TEXT PRIMARY KEY) WITHOUT ROWID;
"""


class ArchiveUnreadable(RecordError):
    """The archive file does not open, does not read, or has another format: whether it
    holds a record cannot be told (it is never rebuilt or replaced)."""


class _NothingCommitted(Exception):
    """The archive file exists but no schema was ever committed to it: no records."""


class Archived(msgspec.Struct, frozen=True):
    """One record as the archive keeps it: the exact bytes of its file."""

    ref: str
    ended_at: str
    decision: str | None
    data: bytes


class Archive:
    """``archive.sqlite3`` beside the live records.

    Read-only (``hostcore status``), the file is opened read-only and never
    created; a missing file is an empty archive.
    """

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._db: sqlite3.Connection | None = None
        self._mutex = threading.RLock()
        # A rolled-back copy a read-only process reads instead (see _rolled_back_copy).
        self._copy: TemporaryDirectory[str] | None = None

    # -- reads -----------------------------------------------------------------------

    def get(self, ref: str) -> bytes | None:
        """The archived bytes of ``ref``; ``None`` when it is not archived."""
        row = self._read(lambda db: db.execute(
            "SELECT data FROM records WHERE ref = ?", (ref,)).fetchone(), None)
        return None if row is None else bytes(row[0])

    def count(self) -> int:
        """How many records the archive holds (kept in ``meta``: no scan)."""
        return self._read(lambda db: _count(db), 0)

    def pending(self) -> list[str]:
        """The archived refs whose live file may exist too (a move or a write back to
        live under way, or killed): the only copies a live file can shadow."""
        rows: list[tuple[str]] = self._read(lambda db: db.execute(
            "SELECT ref FROM pending ORDER BY ref").fetchall(), [])
        return [str(ref) for (ref,) in rows]

    def holds(self, ref: str) -> bool:
        return self._read(lambda db: db.execute(
            "SELECT 1 FROM records WHERE ref = ?", (ref,)).fetchone() is not None, False)

    def decision_members(self) -> Iterator[tuple[str, str]]:
        """``(ref, member)`` of every archived record carrying a decision."""
        rows: list[tuple[str, str]] = self._read(lambda db: db.execute(
            "SELECT ref, decision FROM records WHERE decision IS NOT NULL").fetchall(), [])
        return ((str(ref), str(member)) for ref, member in rows)

    def records(self, batch: int = 1_000) -> Iterator[tuple[str, bytes]]:
        """``(ref, bytes)`` of every archived record, in ref order, ``batch`` at a time
        (so a large archive is never held in memory at once)."""
        after = ""
        while True:
            rows = self._read(functools.partial(_after, start=after, batch=batch),
                              list[tuple[str, bytes]]())
            if not rows:
                return
            for ref, data in rows:
                yield str(ref), bytes(data)
            after = str(rows[-1][0])

    # -- writes ----------------------------------------------------------------------

    def put(self, records: list[Archived], *, pending: bool = True) -> None:
        """Store ``records`` (replacing copies of the same refs) in one durable commit,
        their refs listed pending until :meth:`settle` (``pending=False``: records
        with no live file, as a bulk import writes them).

        Raises :class:`sqlite3.DatabaseError` or :class:`OSError` when the commit
        did not happen: the caller then keeps the live files.
        """
        with self._mutex:
            db = self._writable()
            with db:
                db.execute("BEGIN IMMEDIATE")
                known = _present(db, [r.ref for r in records])
                db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)",
                               [(r.ref, r.ended_at, r.decision, r.data) for r in records])
                if pending:
                    db.executemany("INSERT OR IGNORE INTO pending VALUES (?)",
                                   [(r.ref,) for r in records])
                _set_count(db, _count(db) + len({r.ref for r in records} - known))

    def mark_pending(self, *refs: str) -> None:
        """List ``refs`` pending (durably) before their live files are written again."""
        with self._mutex:
            db = self._writable()
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR IGNORE INTO pending VALUES (?)",
                               [(ref,) for ref in refs])

    def holding(self, refs: list[str]) -> set[str]:
        """Those of ``refs`` the archive holds a copy of."""
        return self._read(lambda db: _present(db, refs), set())

    def settle(self, refs: list[str]) -> None:
        """``refs`` have no live file any more: no longer pending."""
        if not refs:
            return
        with self._mutex:
            db = self._writable()
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("DELETE FROM pending WHERE ref = ?", [(ref,) for ref in refs])

    def discard(self, ref: str) -> bool:
        """Remove the copy of ``ref`` (its live record was written since); True if
        there was one."""
        with self._mutex:
            if not self.path.exists():
                return False
            db = self._writable()
            with db:
                db.execute("BEGIN IMMEDIATE")
                gone = db.execute("DELETE FROM records WHERE ref = ?", (ref,)).rowcount
                db.execute("DELETE FROM pending WHERE ref = ?", (ref,))
                if gone:
                    _set_count(db, _count(db) - gone)
            return bool(gone)

    def close(self) -> None:
        with self._mutex:
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._copy is not None:
                self._copy.cleanup()
                self._copy = None

    # -- connection ------------------------------------------------------------------

    def _read(self, query: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """``query`` on the archive; ``empty`` when there is no archive file yet.

        A file that does not open raises :class:`ArchiveUnreadable` naming it: archived
        records are the truth, so an unreadable archive is an error, not "none".
        """
        with self._mutex:
            if self._db is None and not self.path.exists():
                return empty
            try:
                return query(self._connection())
            except _NothingCommitted:
                return empty
            except sqlite3.DatabaseError as exc:
                raise ArchiveUnreadable(f"{self.path}: the archive cannot be read: {exc}") \
                    from exc

    def _connection(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self.read_only:
            db = self._open_read_only()
            if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0:
                # A creation killed before its schema committed: the file is there and
                # holds nothing yet (a writer makes the schema). Read again next time.
                db.close()
                raise _NothingCommitted
        else:
            db = self._connect()
            if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0:
                # New, or a creation killed before its schema: nothing in it to lose.
                db.executescript(f"BEGIN; {_SCHEMA} INSERT INTO meta VALUES "
                                 f"('format', '{ARCHIVE_FORMAT}'), ('count', '0'); COMMIT;")
        fmt = _meta(db, "format")
        if fmt != str(ARCHIVE_FORMAT):
            db.close()
            # Never rebuilt: what it holds exists nowhere else.
            raise ArchiveUnreadable(f"{self.path}: archive format {fmt!r}, this hostcore reads "
                              f"{ARCHIVE_FORMAT}")
        self._db = db
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        db = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True,
                             isolation_level=None, timeout=30, check_same_thread=False)
        try:
            _meta(db, "format")
            return db
        except sqlite3.OperationalError as exc:
            db.close()
            if exc.sqlite_errorcode & 0xFF != _SQLITE_READONLY:
                raise
        try:
            return self._rolled_back_copy()
        except FileNotFoundError:  # a writer rolled the journal back meanwhile
            return sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True,
                                   isolation_level=None, timeout=30, check_same_thread=False)

    def _rolled_back_copy(self) -> sqlite3.Connection:
        """The archive as its last commit left it, for a read-only process that finds
        the journal of a writer killed mid-commit (SQLite must roll it back, which a
        read-only connection may not): the file and its journal are copied into a
        private temporary folder, where opening rolls the copy back. Nothing under
        the root is written; the next writer rolls the original back itself."""
        # Here, not at the top: only a killed writer's journal needs them, and they cost
        # every start of `hostcore status` 7 ms of imports.
        import shutil
        import tempfile

        journal = Path(f"{self.path}-journal")
        self._copy = tempfile.TemporaryDirectory(prefix="hostcore-archive-")
        copy = Path(self._copy.name) / self.path.name
        before = journal.stat()
        shutil.copyfile(journal, f"{copy}-journal")
        shutil.copyfile(self.path, copy)
        after = journal.stat()  # FileNotFoundError if a writer rolled it back meanwhile
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
            raise sqlite3.OperationalError("the archive's journal changed while copied")
        log.info("ledger archive: reading a copy rolled back from a killed writer's journal")
        return sqlite3.connect(copy, isolation_level=None, check_same_thread=False)

    def _writable(self) -> sqlite3.Connection:
        if self.read_only:
            raise RecordError(f"{self.path}: archive opened read-only")
        return self._connection()

    def _connect(self) -> sqlite3.Connection:
        db = connect_owned(self.path)
        # The truth for what it holds: every commit reaches the disk before it returns.
        db.execute("PRAGMA journal_mode = DELETE")
        db.execute("PRAGMA synchronous = FULL")
        return db


def _meta_table(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    return meta_value(db, key) if _meta_table(db) else None


def _count(db: sqlite3.Connection) -> int:
    return int(_meta(db, "count") or 0)


def _set_count(db: sqlite3.Connection, count: int) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES ('count', ?)", (str(count),))


def _present(db: sqlite3.Connection, refs: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(refs), 500):
        chunk = refs[start:start + 500]
        marks = ",".join("?" * len(chunk))
        found.update(str(ref) for (ref,) in db.execute(
            f"SELECT ref FROM records WHERE ref IN ({marks})", chunk))
    return found


def _after(db: sqlite3.Connection, start: str, batch: int) -> list[tuple[str, bytes]]:
    """The next ``batch`` archived records after ref ``start``, in ref order."""
    return db.execute("SELECT ref, data FROM records WHERE ref > ? ORDER BY ref LIMIT ?",
                      (start, batch)).fetchall()
