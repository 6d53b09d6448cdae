"""The ledger index: a SQLite summary of every portable record, re-derivable, never trusted.

The index answers the poller's candidate queries without opening every record,
and keeps each decision-bearing record's
:func:`~hostcore.workitems.records.decision_member` (the export's ``decisions``
identity folds them). It is a hint: the poller re-reads a record before acting
on it. It is validated against the ``portable`` folder's modification time (every
atomic write renames into that folder, which moves its mtime) and
re-synchronised by comparing each file's size and mtime with what it recorded;
only changed files are read. An index that does not open or has another format
is deleted and rebuilt from the records. SQLite's ``quick_check`` runs only when
the machine has booted since the index was last opened: the index is written
without fsync, so only an unclean shutdown of the machine can damage it.

A read-only ledger (``hostcore status``) opens the index file read-only and uses
it as it is when the folder has not moved since it was written; otherwise (or when
it cannot be opened, or has another format) it copies it into memory and
re-synchronises the copy there, reading only the changed files, and writes nothing.

One connection serves every thread of a process, one call at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from hostcore.errors import RecordError
from hostcore.files import ensure_dir
from hostcore.workitems.records import (
    PortableRecord,
    absent_since_of,
    decision_member,
    kind_and_labels,
    record_class,
    retry_at_of,
)
from hostcore.workitems.sqlite_files import connect_owned, meta_value

log = logging.getLogger("hostcore.workitems.index")

INDEX_FORMAT = 6
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")

T = TypeVar("T")

# Between the labels of the index's ``labels`` column, and around them: a label is
# found by its text between two of these, which no label name holds.
LABEL_SEPARATOR = "\x1f"

# The characters after which a ref's item part begins (``owner/repo#12``, ``task:inbox/7``).
_SCOPE_SEPARATORS = "#/:"


class IndexEntry(msgspec.Struct, frozen=True):
    """One record as the index summarises it."""

    ref: str
    sections: int
    absent_since: str
    updated_at: str
    last_polled_at: str


class LedgerCounters(msgspec.Struct):
    """Record files read and written by this Ledger object (benchmarks, tests, status)."""

    reads: int = 0
    writes: int = 0
    index_rebuilds: int = 0
    index_resyncs: int = 0


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries (
    slug TEXT PRIMARY KEY,
    ref TEXT NOT NULL,
    sections INTEGER NOT NULL,
    class TEXT NOT NULL,
    absent_since TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_polled_at TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    decision TEXT,
    scope TEXT NOT NULL,
    ended_at TEXT NOT NULL,
    retry_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    labels TEXT NOT NULL
);
CREATE INDEX entries_class ON entries (class, absent_since, ref);
-- The distinct scopes of the unstamped records, found by skipping from one to the next.
CREATE INDEX entries_unstamped_scope ON entries (scope, absent_since)
    WHERE class != 'ended';
-- The few records whose question failed and stands (retry_at_of): counted every cycle.
CREATE INDEX entries_retrying ON entries (retry_at) WHERE retry_at != '';
-- The open entries by kind, in the order work_items lists them.
CREATE INDEX entries_open_kind ON entries (kind, scope, absent_since)
    WHERE class != 'ended';
-- Each record's labels as SQLite's lower() folds them (GitHub compares label names
-- without case), with what a label filter combines with and orders by: a filtered
-- page is one index range, and its count reads no entry.
CREATE TABLE entry_labels (label TEXT NOT NULL, slug TEXT NOT NULL,
                           ended INTEGER NOT NULL, scope TEXT NOT NULL,
                           absent_since TEXT NOT NULL, kind TEXT NOT NULL,
                           PRIMARY KEY (label, slug)) WITHOUT ROWID;
CREATE INDEX entry_labels_order ON entry_labels (label, ended, scope, absent_since);
CREATE INDEX entry_labels_slug ON entry_labels (slug);
-- A row REPLACEd by _put clears its own labels; an entry deleted takes them along.
CREATE TRIGGER entries_gone AFTER DELETE ON entries BEGIN
    DELETE FROM entry_labels WHERE slug = old.slug;
END;
CREATE TABLE malformed (slug TEXT PRIMARY KEY, size INTEGER NOT NULL,
                        mtime_ns INTEGER NOT NULL, reason TEXT NOT NULL);
"""


_COLUMNS = "ref, sections, absent_since, updated_at, last_polled_at"


class LedgerIndex:
    """The index file beside the records of ``portable``.

    :param read_file: reads and checks one record file (the ledger's reader).
    :param locked: the ledger's cross-process lock, held while the index is
        re-synchronised or rebuilt.
    :param on_event: called as ``on_event(name, **counts)`` for
        ``ledger.index_rebuilt``.

    With ``path=None`` nothing is written: what a read-only ledger uses. It reads
    the index file ``read_from`` (opened read-only) while that is fresh, and
    otherwise an in-memory copy of it re-synchronised with the records (derived
    from every record when there is no usable file).
    """

    def __init__(self, portable: Path, path: Path | None, *,
                 read_file: Callable[[Path], PortableRecord],
                 locked: Callable[[], AbstractContextManager[None]],
                 counters: LedgerCounters,
                 on_event: Callable[..., object] | None = None,
                 read_from: Path | None = None) -> None:
        self.portable = portable
        self.path = path
        self.read_from = read_from
        # Set while the read-only connection is the index file itself (never written).
        self._on_disk = False
        self._read_file = read_file
        self._locked = locked
        self._counters = counters
        self._on_event = on_event
        self._db: sqlite3.Connection | None = None
        # One connection for every thread of an embedding process: every use holds this.
        self._mutex = threading.RLock()

    # -- queries ---------------------------------------------------------------------

    def entries(self, where: str, args: tuple[Any, ...], order: str = "ref") -> list[IndexEntry]:
        """The entries matching the SQL condition ``where``, ordered by ``order``."""
        sql = f"SELECT {_COLUMNS} FROM entries WHERE {where} ORDER BY {order}"
        return self.read(lambda db: [
            IndexEntry(str(r), int(s), str(a), str(u), str(p))
            for r, s, a, u, p in db.execute(sql, args)])

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` on the fresh index; an index that fails it is rebuilt once."""
        with self._mutex:
            try:
                return query(self.fresh())
            except (sqlite3.DatabaseError, ValueError, TypeError):
                # Rows the index should never hold: it is damaged. Derive it again.
                log.debug("ledger index unreadable; rebuilding", exc_info=True)
                with self._locked():
                    self.drop()
                    self._rebuild("damaged")
                return query(self.fresh())

    # -- writes ----------------------------------------------------------------------

    def recorded(self, slug: str, record: PortableRecord, size: int, mtime_ns: int) -> None:
        """Take in a record the ledger just wrote (under its lock, after :meth:`fresh`).

        Only that write moved the folder since :meth:`fresh` (writers hold the
        lock), so the row and the folder's new mtime are all there is to take in:
        no re-synchronisation, which would stat every record per write.
        """
        with self._mutex:
            db = self._open()
            try:
                with db:
                    _put(db, slug, record, size, mtime_ns)
                    db.execute("DELETE FROM malformed WHERE slug = ?", (slug,))
                    _set_meta(db, "dir_mtime_ns", str(self._dir_mtime()))
            except sqlite3.DatabaseError:
                # The record is written; an index that cannot follow is rebuilt next use.
                log.debug("ledger index update failed; it will be rebuilt", exc_info=True)
                self.drop()

    def removed(self, slugs: list[str]) -> None:
        """Take in that the ledger just unlinked the files of ``slugs`` (under its
        lock, after :meth:`fresh`): as :meth:`recorded`, no re-synchronisation."""
        with self._mutex:
            db = self._open()
            try:
                with db:
                    db.executemany("DELETE FROM entries WHERE slug = ?",
                                   [(slug,) for slug in slugs])
                    _set_meta(db, "dir_mtime_ns", str(self._dir_mtime()))
            except sqlite3.DatabaseError:
                log.debug("ledger index update failed; it will be rebuilt", exc_info=True)
                self.drop()

    def rebuild(self, reason: str = "requested") -> int:
        """Delete the index and derive it again from every record; returns records indexed."""
        with self._mutex, self._locked():
            self.drop()
            db = self._rebuild(reason)
            return int(db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._mutex:
            if self._db is not None:
                self._db.close()
                self._db = None
                self._on_disk = False

    def drop(self) -> None:
        """Close and delete the index files (they are re-derived on next use)."""
        self.close()
        if self.path is None:
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    # -- maintenance -----------------------------------------------------------------

    def fresh(self) -> sqlite3.Connection:
        """The index, re-synchronised first if the folder changed since it was written."""
        db = self._open()
        if meta_value(db, "dir_mtime_ns") != str(self._dir_mtime()):
            if self._on_disk:
                # A read-only process may not write the file: bring a copy up to date.
                db = self._in_memory_copy(db)
                self._resync(db)
                return db
            with self._locked():
                db = self._open()
                if meta_value(db, "dir_mtime_ns") != str(self._dir_mtime()):
                    self._resync(db)
        return db

    def _open(self) -> sqlite3.Connection:
        """The open index; opened, validated (rebuilt if damaged) on first use."""
        if self._db is not None:
            return self._db
        if self.path is None:
            return self._open_read_only()
        ensure_dir(self.portable)
        reason = "missing" if not self.path.exists() else None
        if reason is None:
            try:
                db = self._connect()
                fmt = meta_value(db, "format")
                boot = _boot_id()
                ok = (bool(boot) and meta_value(db, "boot") == boot) or _quick_check(db)
                if ok and fmt == str(INDEX_FORMAT):
                    if meta_value(db, "boot") != boot:
                        with db:
                            _set_meta(db, "boot", boot)
                    self._db = db
                    return db
                db.close()
                reason = "damaged" if not ok else "format"
            except sqlite3.DatabaseError:
                reason = "damaged"
        log.debug("ledger index %s; rebuilding from the records", reason)
        self.drop()
        return self._rebuild(reason)

    def _open_read_only(self) -> sqlite3.Connection:
        """The index file opened read-only, if it opens, checks and has this format;
        else an index derived in memory from the records."""
        if self.read_from is not None and self.read_from.is_file():
            try:
                db = sqlite3.connect(f"{self.read_from.as_uri()}?mode=ro", uri=True,
                                     isolation_level=None, timeout=5,
                                     check_same_thread=False)
                try:
                    boot = _boot_id()
                    ok = (bool(boot) and meta_value(db, "boot") == boot) or _quick_check(db)
                    if ok and meta_value(db, "format") == str(INDEX_FORMAT):
                        self._db, self._on_disk = db, True
                        return db
                except sqlite3.DatabaseError:
                    log.debug("ledger index unreadable read-only", exc_info=True)
                db.close()
            except sqlite3.DatabaseError:
                log.debug("ledger index does not open read-only", exc_info=True)
        return self._rebuild("missing")

    def _in_memory_copy(self, disk: sqlite3.Connection) -> sqlite3.Connection:
        """``disk`` copied into memory (the connection then used), ``disk`` closed."""
        memory = self._connect()
        disk.backup(memory)
        disk.close()
        self._db, self._on_disk = memory, False
        return memory

    def _connect(self) -> sqlite3.Connection:
        if self.path is None:
            return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        db = connect_owned(self.path)
        # Re-derivable: durability is the records' job, so no fsync per update.
        db.execute("PRAGMA synchronous = OFF")
        return db

    def _rebuild(self, reason: str) -> sqlite3.Connection:
        db = self._connect()
        with db:
            db.executescript(_SCHEMA)
            _set_meta(db, "format", str(INDEX_FORMAT))
            _set_meta(db, "boot", _boot_id())
        self._db = db
        self._resync(db)
        self._counters.index_rebuilds += 1
        if self._on_event is not None and self.path is not None:
            records = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            malformed = db.execute("SELECT COUNT(*) FROM malformed").fetchone()[0]
            self._on_event("ledger.index_rebuilt", records=records, malformed=malformed,
                           reason=reason)
        return db

    def _resync(self, db: sqlite3.Connection) -> None:
        """Bring the index in line with ``portable/``, reading only changed files."""
        dir_mtime = self._dir_mtime()  # before the scan: a change during it shows next time
        known = {slug: (size, mtime) for slug, size, mtime in
                 db.execute("SELECT slug, size, mtime_ns FROM entries")}
        bad = {slug: (size, mtime) for slug, size, mtime in
               db.execute("SELECT slug, size, mtime_ns FROM malformed")}
        present: set[str] = set()
        with db:
            for slug, path, stamp in _record_files(self.portable):
                present.add(slug)
                if known.get(slug) == stamp or bad.get(slug) == stamp:
                    continue
                self._index_file(db, path, slug, stamp)
            for slug in (known.keys() | bad.keys()) - present:
                db.execute("DELETE FROM entries WHERE slug = ?", (slug,))
                db.execute("DELETE FROM malformed WHERE slug = ?", (slug,))
            _set_meta(db, "dir_mtime_ns", str(dir_mtime))
        self._counters.index_resyncs += 1

    def _index_file(self, db: sqlite3.Connection, path: Path, slug: str,
                    stamp: tuple[int, int]) -> None:
        try:
            record = self._read_file(path)
        except (OSError, RecordError) as exc:
            log.debug("ledger: skipping malformed record %s: %s", path.name, exc)
            db.execute("DELETE FROM entries WHERE slug = ?", (slug,))
            db.execute("INSERT OR REPLACE INTO malformed VALUES (?, ?, ?, ?)",
                       (slug, *stamp, type(exc).__name__))
            return
        db.execute("DELETE FROM malformed WHERE slug = ?", (slug,))
        _put(db, slug, record, *stamp)

    def _dir_mtime(self) -> int:
        if self.path is None:  # read-only: never create the folder
            return self.portable.stat().st_mtime_ns if self.portable.is_dir() else 0
        return ensure_dir(self.portable).stat().st_mtime_ns


def _record_files(portable: Path) -> Iterator[tuple[str, Path, tuple[int, int]]]:
    """``(slug, path, (size, mtime_ns))`` of every record file in ``portable``."""
    if not portable.is_dir():
        return
    with os.scandir(portable) as scan:
        for item in scan:
            if not item.name.endswith(".json") or item.name.startswith("."):
                continue
            try:
                stat = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            yield item.name[:-5], Path(item.path), (stat.st_size, stat.st_mtime_ns)


def _put(db: sqlite3.Connection, slug: str, record: PortableRecord, size: int,
         mtime_ns: int) -> None:
    poll = record.poll
    last = poll.last_polled_at if poll and isinstance(poll.last_polled_at, str) else ""
    # An ended record has forgotten `poll`: its stamp keeps the kind and labels.
    kind, labels = kind_and_labels(record)
    db.execute(
        "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (slug, record.ref, record.sections, record_class(record), absent_since_of(poll),
         poll.updated_at if poll else "", last, size, mtime_ns, decision_member(record),
         scope_key(record.ref), record.ended.at if record.ended else "",
         retry_at_of(record), kind, labels_column(labels)))
    db.execute("DELETE FROM entry_labels WHERE slug = ?", (slug,))
    if labels:
        row = (slug, record.ended is not None, scope_key(record.ref), absent_since_of(poll),
               kind)
        db.executemany("INSERT OR IGNORE INTO entry_labels VALUES (lower(?), ?, ?, ?, ?, ?)",
                       [(label, *row) for label in labels])


def labels_column(labels: list[str]) -> str:
    """The ``labels`` column of a record: each label between two separators, so
    ``instr(labels, SEP + name + SEP)`` finds one; ``""`` for none (an old record)."""
    if not labels:
        return ""
    return LABEL_SEPARATOR + LABEL_SEPARATOR.join(labels) + LABEL_SEPARATOR


def labels_of(column: str) -> list[str]:
    """The labels a ``labels`` column holds (:func:`labels_column` undone)."""
    return column[1:-1].split(LABEL_SEPARATOR) if column else []


def scope_key(ref: str) -> str:
    """The part of ``ref`` before its item part: up to the last ``#``, ``/`` or ``:``
    (the whole ref when it has none). Refs with one key are taken to share their
    owner and scope (GitHub's ``owner/repo#N``), so ownership is asked once a key."""
    cut = max(ref.rfind(separator) for separator in _SCOPE_SEPARATORS)
    return ref[:cut] if cut > 0 else ref


def _set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


def _quick_check(db: sqlite3.Connection) -> bool:
    return bool(db.execute("PRAGMA quick_check").fetchone()[0] == "ok")


def _boot_id() -> str:
    """This boot of the machine; ``""`` where the system does not say (always checked)."""
    try:
        return BOOT_ID_FILE.read_text().strip()
    except OSError:
        return ""
