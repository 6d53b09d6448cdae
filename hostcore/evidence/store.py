"""The evidence store: one SQLite file (WAL) under the state root.

Evidence rows live in named partitions. Every row gets a store-wide position
that only ever grows: positions come from ``INTEGER PRIMARY KEY AUTOINCREMENT``,
so a purged row's position is never handed out again. Each partition carries a
version ``epoch:rowCount``: appending grows ``rowCount``; a purge recomputes
``rowCount`` from the live count and moves the partition to a fresh epoch, so a
purge followed by appends back to the old count is still told apart from growth.

A purge also records a digest of every removed row's dedupe key, and an append
never stores a row whose key was purged: evidence read again (a copied, renamed
or rewritten transcript, an event fetched again) stays purged.

Rows leave the store only through :class:`hostcore.evidence.seam.ExportSeam`, which
applies the live withholding policy. This module deliberately has no public
method that reads rows back.

Layout (see ``docs/evidence.md``)::

    meta(key, value)                       instance id, schema, epoch and purge sequences
    partitions(id, name, epoch, row_count)
    scopes(id, directory, source_id)       distinct (directory, source) pairs
    evidence(position, part, scope, session_id, ts, git_remote, payload, key)
    tuples(id, part, scope, git_remote, rows)   distinct (partition, scope, remote), counted
    source_cursors(source, cursor)
    source_health(source, skipped, failures, last_error, last_error_at)
    purged_keys(digest)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import msgspec

from hostcore.errors import HostcoreError, RecordError
from hostcore.evidence import schema
from hostcore.evidence.paths import within
from hostcore.evidence.rows import EvidenceRow, PartitionVersion, SourceBatch, storable_text
from hostcore.evidence.usage_totals import Noted, Tally, add_tally, note, tally, tally_in
from hostcore.timestamps import canonical, canonical_all, format_utc, parse, utc_now

# EvidenceRow, PartitionVersion and SourceBatch live in hostcore.evidence.rows;
# they are importable from here too, as in 0.1.
__all__ = ["STORE_FILE_NAME", "Appended", "EvidenceRow", "PartitionVersion", "SourceBatch",
           "SourceHealth", "Staged", "Store", "StoreError"]

STORE_FILE_NAME = "store.sqlite3"
# Pages the writer keeps in memory (negative: KiB). SQLite's default (2 MiB) is
# smaller than the dedupe-key index of a few hundred thousand rows, and every
# append then reads index pages back from the file (see docs/evidence.md).
WRITER_CACHE_KIB = 64 * 1024

# Payloads and lists of keys for json_each: one encoder for all.
_encoder = msgspec.json.Encoder()
# Rows per insert statement (see schema.insert_rows), fewer when SQLite was built
# to take fewer parameters. Past a few hundred rows a larger statement costs no
# less per row to run, but each new one costs its parse (about 3 us a row of its
# text, once per connection; the rest of a batch goes in power-of-two statements):
# at 2,500 a first ingest of 27,000 rows spent 13 ms of its 200 parsing statements.
INSERT_CHUNK_ROWS = 256
# (partition id, scope id, git remote): what the tuples table counts rows by.
TupleKey = tuple[int, int, str]
# Parameters of one evidence row in an insert (see schema.insert_rows).
ROW_PARAMS = 7

# Why a row was not stored although its batch was (counted per source).
UNENCODABLE = "unencodable"  # text no destination can hold: a lone surrogate, or NUL
BAD_VALUE = "bad_value"      # a field of the wrong type, a payload JSON cannot hold


class StoreError(HostcoreError):
    """The store file cannot be used (damaged, busy, full, newer schema, read-only)
    or a purge selector is bad. The message names the file and the reason."""


class Appended(msgspec.Struct):
    """What one append did: rows inserted, and rows refused by reason."""

    inserted: int = 0
    rejected: dict[str, int] = msgspec.field(default_factory=dict)


class Staged(NamedTuple):
    """A batch's insert parameters, worked out by :meth:`Store.stage` ahead of the
    transaction that stores them.

    A partition or scope whose id the store had cached is staged by that id, and
    the id is listed in ``ids``: the transaction uses the parameters only if its
    own look at the ids (after checking no purge moved them) finds each one
    still so. One the store had not met yet is staged by name, ``partition`` or
    ``(directory, source_id)``, and the transaction puts its id in.
    """

    rows: list[EvidenceRow]
    # Seven per row: part, scope, session_id, ts, git_remote, payload, key.
    params: list[Any]
    # Each cached id the parameters use, by partition name or (directory, source id).
    ids: dict[str | tuple[str, str], int]
    # The runs of params, (start, stop), whose rows' part and scope are staged by name.
    named: list[tuple[int, int]]
    # The rows whose payload carries a usage, checked and bucketed (usage_totals.note)
    # while staging has them at hand: the append that adds them to the aggregate goes
    # back to none of the batch's rows.
    usage: list[Noted]
    # Their sums (usage_totals.tally), or None when staging could not make them.
    tally: Tally | None
    # Rows per (part, scope, git remote) as staged (by id or by name), in the order
    # each first appears: what the tuples table and the partitions' counts grow by
    # when every row is inserted, so the append need not read the rows back.
    tuples: dict[tuple[Any, Any, Any], int]


class SourceHealth(msgspec.Struct):
    """What ``hostcore status`` shows of a source's ingest.

    ``skipped`` counts, by reason, every input line or row the source or the store
    skipped since the store was created; ``failures`` is how many attempts in a
    row failed (0 once one works); ``last_error`` is the kind of the last failure
    (``raised: KeyError``), kept after recovery with its time ``last_error_at``.
    """

    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    failures: int = 0
    last_error: str | None = None
    last_error_at: str | None = None


class Store:
    """The embedded evidence store. Open one per host (``host.store``).

    :param path: the SQLite file (created with its schema when missing).
    :param read_only: open for reading only, creating nothing: a missing file
        reads as an empty store (``instance_id`` ``""``), and every write raises
        :class:`StoreError`. Readers never wait for a writer (WAL).

    Every failure of the file itself (damaged, busy for longer than
    ``BUSY_TIMEOUT_MS``, a full disk) raises :class:`StoreError` naming the file.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        # One connection shared by the threads of an embedding process: every use
        # of it holds this lock, so transactions never interleave.
        self._lock = threading.RLock()
        # Ids of partitions and scopes, valid while the store's purge sequence
        # is the one they were read under: another process's purge or drop can
        # delete them, and rows must never be written under a deleted id.
        self._scope_ids: dict[tuple[str, str], int] = {}
        self._part_ids: dict[str, int] = {}
        self._ids_under: str | None = None
        with self._errors():
            if read_only:
                self._db, self.instance_id = self._open_read_only()
            else:
                self._db = schema.connect(self.path, readonly=False)
                try:
                    self._opened = _identity(self.path)
                    self.instance_id = self._init_schema()
                except BaseException:
                    self._db.close()
                    raise

    # -- setup ---------------------------------------------------------------

    def _open_read_only(self) -> tuple[sqlite3.Connection, str]:
        if not self.path.exists():
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            _create_tables(db)
            return db, ""
        db = schema.connect(self.path, readonly=True)
        try:
            values = dict(db.execute("SELECT key, value FROM meta"))
            _check_version(self.path, values)
        except BaseException:
            db.close()
            raise
        return db, str(values.get("instance_id", ""))

    def _init_schema(self) -> str:
        db = self._db
        db.create_function("key_digest", 2, schema.key_digest, deterministic=True)
        db.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        db.execute("BEGIN IMMEDIATE")
        try:
            _create_tables(db)
            values = dict(db.execute("SELECT key, value FROM meta"))
            _check_version(self.path, values)
            if "tuples" not in values:
                # A store written before the tuple summary existed: derive it once.
                db.execute("INSERT INTO tuples (part, scope, git_remote, rows) SELECT part, "
                           "scope, git_remote, COUNT(*) FROM evidence "
                           "GROUP BY part, scope, git_remote ORDER BY MIN(position)")
                db.execute("INSERT INTO meta (key, value) VALUES ('tuples', '1')")
            instance = values.get("instance_id") or uuid.uuid4().hex
            db.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                           [("instance_id", instance), ("schema", str(schema.VERSION)),
                            ("epoch_seq", "0"), ("purge_seq", "0")])
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'",
                       (str(schema.VERSION),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return str(instance)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def replaced(self) -> bool:
        """Whether the file at :attr:`path` is no longer the one this store opened
        for writing: moved away, removed, or another file put in its place (a
        restored backup). Always False for a read-only store."""
        return not self.read_only and _identity(self.path) != self._opened

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn SQLite's failures into a :class:`StoreError` naming the file."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise StoreError(describe_failure(self.path, exc, read_only=self.read_only)) from exc

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside commits together or not at all."""
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        if self.replaced():
            # Writing on would put rows and cursors into a file nobody will read.
            raise StoreError(f"{self.path}: the file was replaced or removed after this "
                             "process opened it; nothing more is written to the old one "
                             "(start hostcore again to use the file there now)")
        with self._lock, self._errors():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                # After a failed COMMIT (a full disk) the transaction may be over
                # already; either way nothing of it is kept, ids it created included.
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                self._ids_under = None
                raise

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors():
            return self._db.execute(sql, params).fetchall()

    # -- writing -------------------------------------------------------------

    def append(self, rows: Iterable[EvidenceRow], *, source: str | None = None,
               cursor: str | None = None) -> int:
        """Insert ``rows`` and, when ``source`` is given, persist its ``cursor``, in one
        transaction. Returns how many rows were inserted.

        A row whose ``(partition, key)`` is already stored, or was purged, is
        skipped and uses no position. A row whose values cannot be stored (text
        that is not valid Unicode or holds NUL, which PostgreSQL destinations
        cannot hold, or a payload JSON cannot hold) is skipped and
        counted, by reason, in the health of ``source`` (else of the row's
        ``source_id``); the rest is stored. A row that is not an
        :class:`EvidenceRow`, or has no partition or source id, is a bug of its
        producer: :class:`~hostcore.errors.RecordError`, and nothing is written.
        """
        return self._append(rows, source, cursor, {}).inserted

    def ingest(self, source: str, batch: SourceBatch, *, previous: str | None,
               staged: Staged | None = None) -> Appended:
        """Store a source's batch: its rows, its cursor and what it skipped
        (``batch.skipped``, added to the source's health), in one transaction;
        the source's failure count goes back to 0.

        ``previous`` is the cursor the batch was read from: when nothing changed
        (no row, no skip, the same cursor, no failure to clear) nothing is
        written, so an idle tick costs no write transaction. ``staged`` is what
        :meth:`stage` made of ``batch.rows``, if it was called.
        """
        skipped = _clean_counts(batch.skipped)
        if not batch.rows and not skipped and batch.cursor == previous:
            found = self._query("SELECT failures FROM source_health WHERE source = ?",
                                (source,))
            if not found or not found[0][0]:
                return Appended()
        return self._append(batch.rows, source, batch.cursor, skipped, ok=True, staged=staged)

    def stage(self, rows: list[EvidenceRow]) -> Staged | None:
        """Work out the insert parameters of ``rows`` ahead of the transaction that
        stores them (:meth:`ingest` with ``staged=``), without touching the file
        and only reading the store's cached ids, so any thread may call it.

        The ingest worker stages each batch before it stores it, so the store's
        write lock, which other processes wait for, is held for little but
        SQLite's own work. Returns None when a row cannot take the
        common path (not an :class:`EvidenceRow`, a value that is not plain text or
        holds NUL, a payload JSON cannot hold): the store then checks the rows one
        by one.
        """
        params: list[Any] = []
        ids: dict[str | tuple[str, str], int] = {}
        named: list[tuple[int, int]] = []
        encode = _encoder.encode
        # Rows come in runs of one directory: ids are looked up once a run.
        group: tuple[object, object, object] = (None, None, None)
        part: Any = None
        scope: Any = None
        by_name = False
        run = 0  # where the rows of the current group start in params
        # Rows come in runs of one remote too: counted a run at a time.
        tuples: dict[tuple[Any, Any, Any], int] = {}
        counting: tuple[Any, Any, Any] | None = None  # the current run's tuple
        since = 0  # the row the current run starts at
        remote: Any = None
        usage: list[tuple[int, Any, str, str, Any]] = []
        try:
            # The batch's stamps made canonical at once (one match when all are common).
            stamps, every_canonical = canonical_all([row.ts for row in rows])
            for index, row in enumerate(rows):
                if not isinstance(row, EvidenceRow):
                    return None
                partition, source_id, directory = row.partition, row.source_id, row.directory
                if (directory != group[1] or partition != group[0]
                        or source_id != group[2] or row.git_remote != remote):
                    if counting is not None:
                        tuples[counting] = tuples.get(counting, 0) + index - since
                    if (partition, directory, source_id) != group:
                        if by_name:
                            named.append((run, len(params)))
                        group = (partition, directory, source_id)
                        found = self._cached_ids(partition, directory, source_id, ids)
                        if found is None:
                            return None
                        part, scope, by_name = found
                        run = len(params)
                    remote, since = row.git_remote, index
                    counting = (part, scope, remote)
                ts, payload = stamps[index], row.payload
                params += (part, scope, row.session_id, ts, remote,
                           encode(payload).decode(), row.key)
                # Most rows carry no usage: a type check and a dict look-up.
                if type(payload) is dict and "usage" in payload:
                    usage.append((index, scope, row.session_id, ts, payload["usage"]))
            if not _plain_text(params):
                return None
        except (TypeError, ValueError, UnicodeEncodeError, OverflowError, AttributeError):
            return None  # AttributeError: a row without a ts, no EvidenceRow
        if by_name:
            named.append((run, len(params)))
        if counting is not None:
            tuples[counting] = tuples.get(counting, 0) + len(rows) - since
        noted = note(usage, canonical=every_canonical) if usage else []
        return Staged(rows, params, ids, named, noted, tally(noted), tuples)

    def _cached_ids(self, partition: object, directory: object, source_id: object,
                    ids: dict[str | tuple[str, str], int]) -> tuple[Any, Any, bool] | None:
        """The part and scope a row is staged with: each its cached id (noted in
        ``ids``) or, when none is cached, its name; and whether either is a name.
        None when a name is not plain non-empty text."""
        if not (partition and source_id and type(partition) is str
                and type(source_id) is str and type(directory) is str):
            return None
        scope_key = (directory, source_id)
        # Read without the store's lock: a stale id is caught by the transaction.
        part = self._part_ids.get(partition)
        scope = self._scope_ids.get(scope_key)
        if part is not None:
            ids[partition] = part
        if scope is not None:
            ids[scope_key] = scope
        return (partition if part is None else part, scope_key if scope is None else scope,
                part is None or scope is None)

    def record_failure(self, source: str, kind: str) -> None:
        """Note that reading or storing ``source`` failed this time (``kind`` says
        how, e.g. ``raised: KeyError``); its cursor and rows are left alone."""
        with self._transaction() as db:
            health = _health(db, source)
            health.failures += 1
            health.last_error = kind
            health.last_error_at = format_utc(utc_now())
            _save_health(db, source, health)

    def _append(self, rows: Iterable[EvidenceRow], source: str | None, cursor: str | None,
                skipped: Mapping[str, int], *, ok: bool = False,
                staged: Staged | None = None) -> Appended:
        outcome = Appended()
        if staged is None or staged.rows is not rows:  # else staging checked every row
            staged = None
            rows = list(rows)
            for index, row in enumerate(rows):
                if not (isinstance(row, EvidenceRow) and row.partition and row.source_id):
                    _refuse(index, row)
        with self._transaction() as db:
            self._check_ids(db)
            head = _head(db)
            rejected: dict[str, dict[str, int]] = {}
            at_once = self._insert_at_once(db, rows, staged, head)
            if at_once is None:
                if not db.in_transaction:
                    # The insert refused a row and rolled everything back: again.
                    self._ids_under = None  # ids it created are gone
                    db.execute("BEGIN IMMEDIATE")
                    self._check_ids(db)
                    head = _head(db)
                at_once = (self._insert_one_by_one(db, rows, source, rejected), None)
            tallied, tuples = at_once
            add_tally(db, tallied, head + 1)
            # Counted while staged, when every row went in; else read back.
            outcome.inserted = _count(db, _tuples_since(db, head) if tuples is None else tuples)
            if source is not None:
                db.execute("INSERT INTO source_cursors (source, cursor) VALUES (?, ?) "
                           "ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor",
                           (source, cursor))
                own = rejected.pop(source, {})
                outcome.rejected = dict(own)
                _note_health(db, source, [own, skipped], recovered=ok)
            for name, counts in rejected.items():
                for reason, n in counts.items():
                    outcome.rejected[reason] = outcome.rejected.get(reason, 0) + n
                if name:
                    _note_health(db, name, [counts], recovered=False)
        return outcome

    def _insert_at_once(self, db: sqlite3.Connection, rows: list[EvidenceRow],
                        staged: Staged | None, head: int
                        ) -> tuple[Tally, dict[TupleKey, int] | None] | None:
        """The common case, every row new and storable, inserted by one statement per
        :data:`INSERT_CHUNK_ROWS` rows from its staged parameters (staged here
        unless staged before with ids that still hold).

        Returns the tally of the inserted rows' usage (see usage_totals) and, when
        every row was inserted, the rows per tuple (else None: a purge left some
        out), or None when a row's key is already stored or repeats in the batch (the
        unique index refuses it) or a value cannot be stored; the caller then goes
        row by row. If it had begun inserting, it rolled the transaction back
        (see schema.insert_rows), positions too: none is used up. Rows whose key a
        purge recorded are left out here already.
        """
        if staged is None or not self._ids_hold(staged.ids):
            staged = self.stage(rows)  # ids are looked up under this transaction
        if staged is None:
            return None
        params: list[Any] | None = staged.params
        if staged.named:
            params = self._ids_for_names(db, staged.params, staged.named)
        if params is None:
            return None
        kept: Sequence[int] = range(len(rows))
        if db.execute(schema.ANY_PURGED).fetchone() is not None:
            params, kept = _without_purged(db, rows, params)
        try:
            _insert_chunked(db, schema.insert_rows, params, ROW_PARAMS)
        except (sqlite3.IntegrityError, UnicodeEncodeError):
            if db.in_transaction:  # a text it could not even bind: undo the chunks before
                db.execute("ROLLBACK")
            return None
        # One statement per chunk, in order, under the write lock: the rows took the
        # positions after head one by one (the rows kept, when a purge left some out).
        # A row's scope id is read here: it may have been staged by name.
        if type(kept) is range:
            # Staged by cached ids, each among those _ids_hold found still so, or by
            # names, which _ids_for_names gave ids.
            tally, tuples = staged.tally, staged.tuples
            if staged.named:
                ids = _named_ids(staged, params)
                tuples = _tuples_by_id(tuples, ids)
                tally = None if tally is None else tally.rescoped(ids)
            if tally is not None:
                return tally, tuples
            return tally_in(db, [(at, params[at * ROW_PARAMS + 1], session, ts, usage, bucket)
                                 for at, _, session, ts, usage, bucket in staged.usage]), tuples
        order = {index: at for at, index in enumerate(kept)}
        return tally_in(db, [(at, params[at * ROW_PARAMS + 1], session, ts, usage, bucket)
                             for index, _, session, ts, usage, bucket in staged.usage
                             if (at := order.get(index, -1)) >= 0]), None

    def _ids_hold(self, ids: dict[str | tuple[str, str], int]) -> bool:
        """Whether every id staged from the cache is the one cached now (the caller
        checked no purge or drop moved the cache since: see _check_ids)."""
        for name, found in ids.items():
            cached = (self._part_ids.get(name) if isinstance(name, str)
                      else self._scope_ids.get(name))
            if cached != found:
                return False
        return True

    def _ids_for_names(self, db: sqlite3.Connection, params: list[Any],
                       named: list[tuple[int, int]]) -> list[Any] | None:
        """``params`` with every partition and scope staged by name given its id
        (created if new); None when a name cannot be stored."""
        params = list(params)
        for start, stop in named:
            part, scope = params[start], params[start + 1]
            if type(part) is str:
                part = self._partition_id(db, part)
            if type(scope) is tuple:
                scope = self._scope_id(db, *scope)
            if part is None or scope is None:
                return None
            rows = (stop - start) // ROW_PARAMS
            params[start:stop:ROW_PARAMS] = [part] * rows
            params[start + 1:stop:ROW_PARAMS] = [scope] * rows
        return params

    def _insert_one_by_one(self, db: sqlite3.Connection, rows: list[EvidenceRow],
                           source: str | None, rejected: dict[str, dict[str, int]]) -> Tally:
        """Check every row, count those that cannot be stored, skip keys already
        stored, purged or repeated, and insert the rest; returns the tally of their
        usage (see usage_totals)."""
        prepared: list[tuple[Any, ...]] = []
        for row in rows:
            values = self._values(db, row)
            if isinstance(values, str):
                # A source id that is not text names no source's health.
                owner = source or row.source_id
                counts = rejected.setdefault(owner if isinstance(owner, str) else "", {})
                counts[values] = counts.get(values, 0) + 1
                continue
            prepared.append(values)
        fresh = _unseen(db, prepared)
        db.executemany(schema.INSERT, [values[:7] for values in fresh])
        # executemany inserts in order: the rows took the positions after head.
        return tally_in(db, note([(at, values[1], values[2], values[3], values[8])
                                  for at, values in enumerate(fresh) if values[8] is not None]))

    def _values(self, db: sqlite3.Connection, row: EvidenceRow) -> tuple[Any, ...] | str:
        """The insert values of ``row`` (plus its partition name and its payload's
        usage, None when it has none), or why it cannot be stored."""
        session, ts, remote, key = row.session_id, row.ts, row.git_remote, row.key
        if not (isinstance(session, str) and isinstance(ts, str)
                and isinstance(remote, str) and (key is None or isinstance(key, str))):
            return BAD_VALUE
        if not (storable_text(session) and storable_text(ts) and storable_text(remote)
                and (key is None or storable_text(key))):
            return UNENCODABLE
        part = self._partition_id(db, row.partition)
        scope = self._scope_id(db, row.directory, row.source_id)
        if part is None or scope is None:
            return UNENCODABLE
        try:
            payload = _encoder.encode(row.payload).decode()
        except UnicodeEncodeError:
            return UNENCODABLE
        except (TypeError, ValueError, OverflowError):
            return BAD_VALUE
        usage = row.payload.get("usage") if type(row.payload) is dict else None
        return (part, scope, session, canonical(ts), remote, payload, key, row.partition, usage)

    def _check_ids(self, db: sqlite3.Connection) -> None:
        """Forget cached ids when any process purged or dropped since they were read,
        or a transaction that may have created some was rolled back."""
        found = db.execute(schema.PURGE_SEQ).fetchone()
        current = None if found is None else str(found[0])
        if current != self._ids_under:
            self._scope_ids.clear()
            self._part_ids.clear()
            self._ids_under = current

    def _partition_id(self, db: sqlite3.Connection, name: str) -> int | None:
        """The id of partition ``name`` (created if new); None when the name is
        not text that can be stored."""
        if not isinstance(name, str):
            return None
        part = self._part_ids.get(name)
        if part is None:
            if not storable_text(name):
                return None
            found = db.execute("SELECT id FROM partitions WHERE name = ?", (name,)).fetchone()
            if found is None:
                found = db.execute(
                    "INSERT INTO partitions (name, epoch, row_count) VALUES (?, ?, 0) "
                    "RETURNING id", (name, _next_epoch(db))).fetchone()
            part = self._part_ids[name] = found[0]
        return part

    def _scope_id(self, db: sqlite3.Connection, directory: str, source_id: str) -> int | None:
        """The id of the scope (``directory``, ``source_id``), created if new; None
        when either is not text that can be stored."""
        if not (isinstance(directory, str) and isinstance(source_id, str)):
            return None
        key = (directory, source_id)
        scope = self._scope_ids.get(key)
        if scope is None:
            if not (storable_text(directory) and storable_text(source_id)):
                return None
            db.execute("INSERT OR IGNORE INTO scopes (directory, source_id) VALUES (?, ?)", key)
            scope = db.execute("SELECT id FROM scopes WHERE directory = ? AND source_id = ?",
                               key).fetchone()[0]
            self._scope_ids[key] = scope
        return scope

    def purge(self, *, source_id: str | None = None, session_id: str | None = None,
              directory: str | None = None, before: str | None = None,
              dry_run: bool = False) -> dict[str, int]:
        """Delete every row matching all the given selectors, in one transaction.

        ``directory`` matches that directory and everything below it (on path
        boundaries, ``/`` or ``\\``); ``before`` matches rows whose canonical
        timestamp is earlier. Every partition that lost rows gets its live row count
        and a fresh epoch. The digest of every deleted row's dedupe key is kept, so
        an append never stores that row again. Returns rows deleted per partition
        (only those that lost any). At least one selector is required. ``dry_run``
        only counts.
        """
        with self._transaction() as db:
            where, params = _purge_filter(db, source_id, session_id, directory, before)
            deleted = dict(db.execute(
                f"SELECT part, COUNT(*) FROM evidence WHERE {where} GROUP BY part", params))
            names = dict(db.execute("SELECT id, name FROM partitions"))
            if deleted and not dry_run:
                for part in deleted:
                    db.execute(f"INSERT OR IGNORE INTO purged_keys (digest) SELECT "
                               f"key_digest(?, key) FROM evidence WHERE {where} AND part = ? "
                               f"AND key IS NOT NULL", (names[part], *params, part))
                scopes = [r[0] for r in db.execute(
                    f"SELECT DISTINCT scope FROM evidence WHERE {where}", params)]
                gone = db.execute(f"SELECT COUNT(*), part, scope, git_remote FROM evidence "
                                  f"WHERE {where} GROUP BY part, scope, git_remote",
                                  params).fetchall()
                db.execute(f"DELETE FROM evidence WHERE {where}", params)
                db.executemany("UPDATE tuples SET rows = rows - ? WHERE part = ? AND scope = ? "
                               "AND git_remote = ?", gone)
                db.execute("DELETE FROM tuples WHERE rows <= 0")
                for part in deleted:
                    db.execute("UPDATE partitions SET epoch = ?, row_count = (SELECT COUNT(*) "
                               "FROM evidence WHERE part = ?) WHERE id = ?",
                               (_next_epoch(db), part, part))
                # A purged directory's name should not outlive its rows.
                db.executemany("DELETE FROM scopes WHERE id = ? AND NOT EXISTS "
                               "(SELECT 1 FROM evidence WHERE scope = ?)",
                               [(s, s) for s in scopes])
                db.execute(schema.BUMP_PURGE_SEQ)
        return {names[part]: count for part, count in deleted.items()}

    def drop_partition(self, name: str) -> None:
        """Delete a partition and all its rows. A later append under the same name
        starts a new partition with an epoch never used before. Unlike a purge,
        no key is recorded: the partition can be filled again."""
        with self._transaction() as db:
            found = db.execute("SELECT id FROM partitions WHERE name = ?", (name,)).fetchone()
            if found is None:
                return
            db.execute("DELETE FROM evidence WHERE part = ?", found)
            db.execute("DELETE FROM tuples WHERE part = ?", found)
            db.execute("DELETE FROM partitions WHERE id = ?", found)
            db.execute("DELETE FROM scopes WHERE NOT EXISTS "
                       "(SELECT 1 FROM evidence WHERE scope = scopes.id)")
            db.execute(schema.BUMP_PURGE_SEQ)

    # -- cheap reads (no row is read) ----------------------------------------

    def partitions(self) -> dict[str, PartitionVersion]:
        """Every partition and its version, read from the partitions table only."""
        return {name: PartitionVersion(epoch, count) for name, epoch, count in self._query(
            "SELECT name, epoch, row_count FROM partitions ORDER BY name")}

    def directories(self) -> list[str]:
        """Every directory some stored row was recorded in (no row is read: the
        scopes table names each once)."""
        return [d for (d,) in self._query("SELECT DISTINCT directory FROM scopes")]

    def source_ids(self) -> list[str]:
        """Every source id some stored row carries (read from the scopes table only)."""
        return [s for (s,) in self._query("SELECT DISTINCT source_id FROM scopes")]

    def source_cursor(self, source: str) -> str | None:
        """The cursor last persisted for ``source`` (``None`` when never ingested)."""
        found = self._query("SELECT cursor FROM source_cursors WHERE source = ?", (source,))
        return found[0][0] if found else None

    def source_health(self) -> dict[str, SourceHealth]:
        """What was skipped and what failed, per source that ever skipped or failed."""
        try:
            found = self._query("SELECT source, skipped, failures, last_error, last_error_at "
                                "FROM source_health ORDER BY source")
        except StoreError:
            if self.read_only and not self._has_table("source_health"):
                return {}  # a store written before health was kept
            raise
        return {source: SourceHealth(_decode_counts(skipped), failures, error, at)
                for source, skipped, failures, error, at in found}

    def _has_table(self, name: str) -> bool:
        return bool(self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (name,)))

    def head_position(self) -> int:
        """The highest position ever assigned (0 when no row was ever appended)."""
        found = self._query("SELECT seq FROM sqlite_sequence WHERE name = 'evidence'")
        return int(found[0][0]) if found else 0

    def stats(self) -> dict[str, int]:
        """Counts for ``hostcore status``: partitions, scopes, rows, head position."""
        parts = self.partitions()
        scopes = self._query("SELECT COUNT(*) FROM scopes")[0][0]
        return {"partitions": len(parts), "rows": sum(v.row_count for v in parts.values()),
                "scopes": scopes, "head_position": self.head_position()}


def describe_failure(path: Path, exc: sqlite3.DatabaseError, *, read_only: bool = False) -> str:
    """One line naming ``path`` and why SQLite could not use it."""
    reason = _sqlite_reason(exc)
    name = getattr(exc, "sqlite_errorname", "") or ""
    if path.is_dir():
        return f"{path}: is a folder, not an evidence store"
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return f"{path}: not an evidence store, or damaged ({reason})"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return (f"{path}: busy: another process held it for over "
                f"{schema.BUSY_TIMEOUT_MS / 1000:g} s ({reason})")
    if name.startswith("SQLITE_FULL") or _disk_full(path):
        # Even a reader needs room beside the file (WAL's shared-memory index).
        verb = "read" if read_only else "written"
        return f"{path}: cannot be {verb}: no space left on device ({reason})"
    if name.startswith("SQLITE_READONLY"):
        return f"{path}: cannot be written ({reason})"
    return f"{path}: cannot be used ({reason})"


def _disk_full(path: Path) -> bool:
    try:
        found = os.statvfs(path.parent)
    except OSError:
        return False
    return found.f_bavail == 0


def _identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path``; None when there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _create_tables(db: sqlite3.Connection) -> None:
    for statement in schema.DDL.split(";"):
        if statement.strip():
            db.execute(statement)
    for statement in schema.USAGE_DDL:  # triggers hold ";": one statement apiece
        db.execute(statement)


def _check_version(path: Path, values: dict[str, str]) -> None:
    found = int(values.get("schema", schema.VERSION))
    if found > schema.VERSION:
        raise StoreError(f"{path}: store schema {found} is newer than this hostcore "
                         f"understands ({schema.VERSION}); upgrade hostcore")


def _sqlite_reason(exc: sqlite3.DatabaseError) -> str:
    """SQLite's own words for why a file is unusable (they name no path)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _next_epoch(db: sqlite3.Connection) -> int:
    found: int = db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = "
                            "'epoch_seq' RETURNING CAST(value AS INTEGER)").fetchone()[0]
    return found


def _refuse(index: int, row: Any) -> NoReturn:
    """Raise the :class:`RecordError` that says why ``row`` is not a row to store."""
    if not isinstance(row, EvidenceRow):
        raise RecordError(f"evidence row {index}: expected EvidenceRow, got {type(row).__name__}")
    if not row.partition:
        raise RecordError(f"evidence row {index}: partition must not be empty")
    raise RecordError(f"evidence row {index}: source_id must not be empty")


def _head(db: sqlite3.Connection) -> int:
    found = db.execute(schema.HEAD_POSITION).fetchone()
    return int(found[0]) if found else 0


def _plain_text(params: list[Any]) -> bool:
    """Whether every session id, timestamp, remote and key among insert ``params``
    (a key may be None) is text free of NUL (see storable_text; a lone surrogate
    fails the insert itself). Checked for a whole batch by a few C loops, not row by
    row: ``join`` refuses anything but text (TypeError)."""
    texts = "".join(params[2::ROW_PARAMS] + params[3::ROW_PARAMS] + params[4::ROW_PARAMS])
    keys = "".join(filter(None, params[6::ROW_PARAMS]))  # None (no key) left out in C
    return "\0" not in texts and "\0" not in keys


def _insert_chunked(db: sqlite3.Connection, statement: Callable[[int], str],
                    params: list[Any], width: int) -> None:
    """:func:`schema.insert_chunked` by :data:`INSERT_CHUNK_ROWS` rows."""
    schema.insert_chunked(db, statement, params, width, INSERT_CHUNK_ROWS)


def _tuples_since(db: sqlite3.Connection, head: int) -> dict[TupleKey, int]:
    """Rows per tuple inserted after position ``head``, in the order tuples first appear."""
    return {(part, scope, remote): n
            for part, scope, remote, n in db.execute(schema.COUNT_NEW, (head,))}


def _named_ids(staged: Staged, params: list[Any]) -> dict[Any, Any]:
    """The id of each partition and scope ``staged`` by name, as ``params`` (its
    parameters once the append's transaction made the ids) holds it in its place."""
    ids: dict[Any, Any] = {}
    for start, _ in staged.named:
        ids[staged.params[start]] = params[start]
        ids[staged.params[start + 1]] = params[start + 1]
    return ids


def _tuples_by_id(tuples: dict[tuple[Any, Any, Any], int], ids: dict[Any, Any]
                  ) -> dict[TupleKey, int]:
    """Staged rows per tuple, each partition and scope staged by name given its id
    in ``ids``. A scope cached halfway through staging has rows staged both ways:
    one tuple here."""
    counted: dict[TupleKey, int] = {}
    for (part, scope, remote), n in tuples.items():
        key = (ids.get(part, part), ids.get(scope, scope), remote)
        counted[key] = counted.get(key, 0) + n
    return counted


def _count(db: sqlite3.Connection, inserted: dict[TupleKey, int]) -> int:
    """Grow the partitions' row counts and the tuple summary by ``inserted`` (rows
    per tuple); returns how many rows that is. New tuples get ids in its order."""
    parts: dict[int, int] = {}
    for (part, _, _), n in inserted.items():
        parts[part] = parts.get(part, 0) + n
    db.executemany("UPDATE partitions SET row_count = row_count + ? WHERE id = ?",
                   [(n, part) for part, n in parts.items()])
    _insert_chunked(db, schema.count_tuples,
                    [value for found, n in inserted.items() for value in (*found, n)], 4)
    return sum(parts.values())


def _purged(db: sqlite3.Connection, digests: list[str]) -> set[str]:
    """The digests, among ``digests``, that a purge recorded."""
    return {d for (d,) in db.execute(schema.PURGED_DIGESTS, (_encoder.encode(digests),))}


def _without_purged(db: sqlite3.Connection, rows: list[EvidenceRow],
                    params: list[Any]) -> tuple[list[Any], Sequence[int]]:
    """``params`` (:data:`ROW_PARAMS` per row) without the rows whose key a purge
    recorded, and the indexes in ``rows`` of the rows left."""
    digests = [schema.key_digest(row.partition, row.key) for row in rows if row.key is not None]
    gone = _purged(db, digests)
    if not gone:
        return params, range(len(rows))
    kept = [at for at, digest in enumerate(_digest_per_row(rows, digests))
            if digest not in gone]
    return [value for at in kept for value in params[at * ROW_PARAMS:(at + 1) * ROW_PARAMS]], kept


def _digest_per_row(rows: list[EvidenceRow], digests: list[str]) -> Iterator[str | None]:
    """``digests`` (one per keyed row, in order) spread back over ``rows``."""
    keyed = iter(digests)
    for row in rows:
        yield None if row.key is None else next(keyed)


def _unseen(db: sqlite3.Connection, prepared: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``prepared`` without keyed rows that are already stored, were purged, or
    repeat an earlier row of the batch. One indexed query per partition (and one
    for purged keys, when any purge ever recorded one), not one per row."""
    keys: dict[int, list[str]] = {}
    for values in prepared:
        if values[6] is not None:
            keys.setdefault(values[0], []).append(values[6])
    if not keys:
        return prepared
    stored: set[tuple[int, str]] = set()
    for part, part_keys in keys.items():
        stored.update((part, key) for (key,) in db.execute(
            schema.STORED_KEYS, (part, _encoder.encode(part_keys))))
    purged: set[str] = set()
    if db.execute(schema.ANY_PURGED).fetchone() is not None:
        purged = _purged(db, [schema.key_digest(values[7], values[6])
                              for values in prepared if values[6] is not None])
    fresh: list[tuple[Any, ...]] = []
    for values in prepared:
        key = values[6]
        if key is not None:
            seen = (values[0], key)
            if seen in stored or (purged and schema.key_digest(values[7], key) in purged):
                continue
            stored.add(seen)
        fresh.append(values)
    return fresh


def _note_health(db: sqlite3.Connection, source: str, skipped: list[Mapping[str, int]], *,
                 recovered: bool) -> None:
    """Add ``skipped`` counts to ``source``'s health and, when ``recovered``, set its
    failure count back to 0; writes only when that changes something."""
    if not any(skipped) and not recovered:
        return
    health = _health(db, source)
    if not any(skipped) and not health.failures:
        return
    for counts in skipped:
        for reason, n in counts.items():
            health.skipped[reason] = health.skipped.get(reason, 0) + n
    if recovered:
        health.failures = 0
    _save_health(db, source, health)


def _health(db: sqlite3.Connection, source: str) -> SourceHealth:
    found = db.execute("SELECT skipped, failures, last_error, last_error_at FROM source_health "
                       "WHERE source = ?", (source,)).fetchone()
    if found is None:
        return SourceHealth()
    return SourceHealth(_decode_counts(found[0]), found[1], found[2], found[3])


def _save_health(db: sqlite3.Connection, source: str, health: SourceHealth) -> None:
    db.execute("INSERT INTO source_health (source, skipped, failures, last_error, last_error_at) "
               "VALUES (?, ?, ?, ?, ?) ON CONFLICT (source) DO UPDATE SET skipped = "
               "excluded.skipped, failures = excluded.failures, last_error = "
               "excluded.last_error, last_error_at = excluded.last_error_at",
               (source, msgspec.json.encode(health.skipped, order="sorted").decode(),
                health.failures, health.last_error, health.last_error_at))


def _decode_counts(text: str) -> dict[str, int]:
    try:
        counts = msgspec.json.decode(text, type=dict[str, int])
    except msgspec.DecodeError:
        return {}
    return counts


def _clean_counts(counts: Any) -> dict[str, int]:
    """A source's ``skipped`` counts, keeping only positive ints under text reasons."""
    if not isinstance(counts, Mapping):
        return {}
    return {str(reason): n for reason, n in counts.items()
            if isinstance(n, int) and not isinstance(n, bool) and n > 0
            and storable_text(str(reason))}


def _purge_filter(db: sqlite3.Connection, source_id: str | None, session_id: str | None,
                  directory: str | None, before: str | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if source_id is not None or directory is not None:
        # Scopes are few: match them in Python with the policy's path rules.
        scopes = [scope for scope, scope_dir, scope_source in db.execute(
                      "SELECT id, directory, source_id FROM scopes")
                  if (source_id is None or scope_source == source_id)
                  and (directory is None or within(scope_dir, directory))]
        clauses.append("scope IN (SELECT value FROM json_each(?))")
        params.append(msgspec.json.encode(scopes).decode())
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(session_id)
    if before is not None:
        cutoff = parse(before)
        if cutoff is None:
            raise StoreError(f"purge before {before!r}: not an ISO-8601 timestamp "
                             "naming a moment in years 0001 to 9999 (UTC)")
        # Canonical timestamps compare as text; an unparseable ts is never matched.
        clauses.append("ts < ? AND ts GLOB '[0-9][0-9][0-9][0-9]-*Z'")
        params.append(format_utc(cutoff, "micro"))
    if not clauses:
        raise StoreError("purge needs at least one selector (source, session, directory, "
                         "before)")
    return " AND ".join(clauses), params
