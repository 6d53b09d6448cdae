"""The export seam: the one way evidence rows leave the store.

``read_rows_since(partition, cursor, columns)`` streams the rows after
``cursor`` (a position), in position order, as ``(position, *columns)`` tuples,
keeping back every row the live withholding policy withholds.

How a read works (and why it is fast): rows do not carry their directory and
source as text but the id of their *scope*, a distinct (directory, source) pair.
Each read opens its own read-only connection and one read transaction; inside
it, it reads the scopes, asks the policy once per scope (cached per pair, see
:mod:`hostcore.evidence.policy`) and hands SQLite one byte per scope id saying
whether the scope is permitted, so SQLite skips withheld rows itself at the
cost of one blob lookup per row. Rows are fetched in chunks of
:data:`FETCH_ROWS`, so memory does not grow with the number of rows read.

The policy is live for the whole read, not only at its start. Between chunks
the read compares the policy fingerprint (a few microseconds: each input keys
its part on its state file's stat) with the one its flags were built under;
when it moved, the flags are rebuilt and the read goes on from the last
position it returned, in the same snapshot. So a policy change made by another
process while a long export runs withholds every row read after the next chunk
boundary: at most the rows of the chunk being fetched when the change landed
(:data:`FETCH_ROWS`) can still leave under the old policy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Generator, Sequence
from typing import TYPE_CHECKING, Any

from hostcore.evidence import schema
from hostcore.evidence.schema import COLUMNS, TUPLE_COLUMNS, SeamError
from hostcore.evidence.store import StoreError, describe_failure

if TYPE_CHECKING:
    from hostcore.evidence.policy import Policy
    from hostcore.evidence.store import Store

# COLUMNS and TUPLE_COLUMNS: the columns reads offer (defined with the schema).
__all__ = ["COLUMNS", "FETCH_ROWS", "TUPLE_COLUMNS", "ExportSeam", "SeamError"]

# Rows fetched from SQLite per round trip: bounds the memory of a read, and how
# many rows can leave after a policy change lands (see the module docstring).
FETCH_ROWS = 1024

# The largest position SQLite can assign: "no upper bound" for a read.
_NO_BOUND = 2**63 - 1

Row = tuple[Any, ...]


class ExportSeam:
    """Reads evidence under the live withholding policy (``host.seam``).

    :param fetch_rows: rows per fetch (memory bound of a read; tests shrink it).
    """

    def __init__(self, store: Store, policy: Policy, *, fetch_rows: int = FETCH_ROWS) -> None:
        self._store = store
        self._policy = policy
        self._fetch_rows = fetch_rows
        # Scopes are only ever added (ids are never reused), so each read fetches
        # just the new ones. Keyed by the store's instance id in case the file is
        # replaced underneath a long-lived host.
        self._scopes: list[tuple[int, str, str]] = []
        self._scopes_of: str | None = None
        # The permitted-scope flags and the fingerprint they were built under:
        # rebuilt only when the fingerprint moves (or new scopes appear).
        self._flags = b""
        self._flags_under: str | None = None
        #: How many times reads compared the fingerprint, and how many found it moved.
        self.policy_checks = 0
        self.policy_changes = 0

    def export_policy_fingerprint(self) -> str:
        """The live policy's fingerprint; no row reads."""
        return self._policy.fingerprint()

    async def read_rows_since(self, partition: str | None, cursor: int,
                              columns: Sequence[str], *,
                              until: int | None = None) -> AsyncIterator[Row]:
        """Yield ``(position, *columns)`` for each permitted row after ``cursor``
        (and at or before ``until``, when given), in position order;
        ``partition=None`` reads every partition.

        Between chunks the event loop gets a turn, so a long read does not
        starve other tasks. (asyncio is imported here, not at module level: only
        this reader needs it, and every ``hostcore run`` imports the seam.)
        """
        import asyncio

        chunks = self._chunks(schema.select_rows(partition, columns), partition, cursor, until)
        try:
            for chunk in chunks:
                for row in chunk:
                    yield row
                await asyncio.sleep(0)
        finally:
            chunks.close()

    def read_rows_since_sync(self, partition: str | None, cursor: int,
                             columns: Sequence[str], *,
                             until: int | None = None) -> Generator[Row, None, None]:
        """The synchronous twin of :meth:`read_rows_since` (same rows, same order)."""
        chunks = self._chunks(schema.select_rows(partition, columns), partition, cursor, until)
        return (row for chunk in chunks for row in chunk)

    def read_tuples_since_sync(self, partition: str | None, cursor: int,
                               columns: Sequence[str], *,
                               until: int | None = None) -> Generator[Row, None, None]:
        """Yield ``(tuple_id, *columns)`` for each distinct (directory, source,
        git_remote) of ``partition``'s rows whose id is after ``cursor`` (and at or
        before ``until``), in id order, keeping back every tuple whose rows the
        policy withholds (the same per-scope verdicts :meth:`read_rows_since`
        applies). Columns: ``directory``, ``source_id``, ``git_remote``, ``partition``.

        The store keeps these tuples, with their row counts, as rows are appended
        and purged, so the work is proportional to distinct tuples, not rows. A
        tuple's id is assigned when it first appears: rows appended later under a
        known tuple do not bring it back. A consumer that must see every row's
        value notes :meth:`Store.head_position` before it starts and reads the
        rows after that position afterwards.
        """
        chunks = self._chunks(schema.select_tuples(partition, columns), partition, cursor,
                              until)
        return (row for chunk in chunks for row in chunk)

    def tuple_head_sync(self) -> int:
        """The highest tuple id the store ever assigned (0 when none). Tuple ids are
        one sequence over every partition, so a read of ids ``(cursor, until]``
        examines at most ``until - cursor`` tuples, withheld or not: what a budget
        of tuples can count without reading any."""
        try:
            db = schema.connect(self._store.path, readonly=True)
            try:
                found = db.execute(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'tuples'").fetchone()
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(describe_failure(self._store.path, exc, read_only=True)) from None
        return int(found[0]) if found else 0

    def _chunks(self, sql: str, partition: str | None, cursor: int,
                until: int | None) -> Generator[list[Row], None, None]:
        _check_position("cursor", cursor)
        if until is not None:
            _check_position("until", until)
        return self._run(sql, partition, cursor, _NO_BOUND if until is None else until)

    def _run(self, sql: str, partition: str | None, after: int,
             until: int) -> Generator[list[Row], None, None]:
        try:
            yield from self._read(sql, partition, after, until)
        except sqlite3.DatabaseError as exc:
            # Say which file and why, as the store does: a damaged store must not
            # read as an anonymous database error.
            raise StoreError(describe_failure(self._store.path, exc, read_only=True)) from None

    def _read(self, sql: str, partition: str | None, after: int,
              until: int) -> Generator[list[Row], None, None]:
        db = schema.connect(self._store.path, readonly=True)
        try:
            # One read transaction: the scopes evaluated and the rows read are the
            # same snapshot, whatever writers do meanwhile.
            db.execute("BEGIN")
            tail = (partition,) if partition is not None else ()
            flags, under = self._permitted(db)
            rows = db.execute(sql, (after, until, flags, *tail))
            while chunk := rows.fetchmany(self._fetch_rows):
                yield chunk
                after = chunk[-1][0]
                self.policy_checks += 1
                if self._policy.volatile or self._policy.fingerprint() != under:
                    # The policy moved (or cannot say): go on from the last row
                    # returned, under flags built from the live policy.
                    self.policy_changes += 1
                    rows.close()
                    flags, under = self._permitted(db)
                    rows = db.execute(sql, (after, until, flags, *tail))
        finally:
            db.close()

    def _permitted(self, db: sqlite3.Connection) -> tuple[bytes, str]:
        """The permitted-scope flags for this snapshot, and the fingerprint they hold under."""
        known = len(self._scopes)
        scopes = self._known_scopes(db)
        fingerprint = self._policy.fingerprint()
        # A replaced store file empties the flags (see _known_scopes): rebuilt too.
        if self._policy.volatile or fingerprint != self._flags_under or not self._flags:
            self._flags = _permitted_flags(scopes, self._policy)
        elif len(scopes) > known:
            self._flags = _extend_flags(self._flags, scopes[known:], self._policy)
        self._flags_under = fingerprint
        return self._flags, fingerprint

    def _known_scopes(self, db: sqlite3.Connection) -> list[tuple[int, str, str]]:
        instance = db.execute(schema.INSTANCE_ID).fetchone()
        if instance is None or instance[0] != self._scopes_of:
            self._scopes = []
            self._flags = b""
            self._scopes_of = None if instance is None else instance[0]
        newest = self._scopes[-1][0] if self._scopes else 0
        self._scopes += db.execute(schema.NEW_SCOPES, (newest,))
        return self._scopes


def _permitted_flags(scopes: list[tuple[int, str, str]], policy: Policy) -> bytes:
    """One byte per scope id (``scopes`` in id order): 1 when the policy permits the scope's rows.

    SQLite indexes a blob by bytes in O(1), so ``substr(flags, scope + 1, 1)``
    costs next to nothing per row. A scope id past the end reads as withheld.
    """
    return _extend_flags(b"\0", scopes, policy)


def _extend_flags(flags: bytes, scopes: list[tuple[int, str, str]], policy: Policy) -> bytes:
    """``flags`` grown to cover ``scopes`` (all newer than what it covers)."""
    grown = bytearray(flags)
    if scopes:
        grown.extend(bytes(scopes[-1][0] + 1 - len(grown)))
    for scope, _, _ in scopes:
        grown[scope] = 1
    for scope in policy.withheld(scopes):
        grown[scope] = 0
    return bytes(grown)


def _check_position(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SeamError(f"{name} {value!r}: expected a position (an int >= 0)")
