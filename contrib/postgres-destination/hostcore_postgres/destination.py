"""A PostgreSQL database that receives the export stream of many hosts.

Rows are keyed by (stream, origin, position); each origin's position and the
governance it publishes live in one ``refs`` row (see
:mod:`hostcore_postgres.schema`). A push is one transaction:

1. take the schema's advisory lock, shared (a migration takes it exclusively), then
   lock the origin's ``refs`` row (``SELECT … FOR UPDATE``; the row is created
   on an origin's first push), reading in the same statement the schema
   version and the destination's instance id;
2. :func:`~hostcore.export.batch.check_continuity` and
   :func:`~hostcore.export.batch.apply_governance` against what that locked row
   holds, so a governance conflict is decided by the database's lock, not by a
   read racing a write, and raises before anything is written;
3. ``COPY`` the rows past the position (binary format; measured 5 to 6.5 times
   faster than pipelined inserts, benchmarks/postgres_export.py), dropping
   those at or below it;
4. update the ``refs`` row (position, identities, ``pushed_by``, ``pushed_at``);
5. commit.

A push killed at any point commits whole or not at all, and the next one starts
from what was committed: nothing is lost or duplicated. The database's primary
key refuses a duplicate even if ``refs`` were edited by hand.

Connections: one per destination, opened on first use (psycopg is imported only
then: building a host must not load it), in autocommit mode, with the push's
own transaction. A connection the server dropped while it sat idle is replaced
once before a read; a push is never re-sent (the next run resumes instead).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar

import msgspec

from hostcore.export.batch import ExportBatch, ExportRow, apply_governance, check_continuity
from hostcore.export.ref import Ref
from hostcore_postgres.errors import (
    PostgresDestinationError,
    explain,
    explain_connect,
)
from hostcore_postgres.schema import (
    MIGRATIONS,
    check_tables,
    lock_key,
    migrate,
    read_version,
    refuse_writer,
)

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

# Seconds libpq waits for a server to answer a new connection, unless the dsn or
# PGCONNECT_TIMEOUT says otherwise: an unreachable host fails in this long.
CONNECT_TIMEOUT_SECONDS = 10
APPLICATION_NAME = "hostcore-postgres"

# The COPY columns, in the order rows are written, and their types (binary COPY
# needs each one exact).
_COPY_COLUMNS: tuple[LiteralString, ...] = (
    "stream", "origin", "position", "partition", "source_id", "session_id", "ts",
    "directory", "git_remote", "payload", "key")
_COPY_TYPES = ("text", "text", "int8", "text", "text", "text", "text", "text", "text",
               "json", "text")

Emit = Callable[..., object]


class PostgresDestination:
    """The export stream pushed into the database ``dsn`` names, in ``schema``.

    :param dsn: a libpq connection string (``key=value`` pairs or a
        ``postgresql://`` URI); libpq fills in what it leaves out from the
        ``PG*`` variables and ``~/.pgpass``. ``None``: not configured (the
        destination is unavailable and refuses to push).
    :param schema: the PostgreSQL schema holding the tables.
    :param unavailable: why the destination cannot be used (a config problem),
        reported by :meth:`availability`.
    :param emit: ``host.emit``, for the destination's events.
    :param migrations: the schema versions (tests inject newer ones).
    """

    name = "postgres"

    def __init__(self, dsn: str | None, *, schema: str = "hostcore",
                 unavailable: str | None = None, emit: Emit | None = None,
                 migrations: Mapping[int, tuple[LiteralString, ...]] = MIGRATIONS) -> None:
        self._dsn = dsn
        self.schema = schema
        self._unavailable = unavailable
        self._emit = emit
        self._migrations = migrations
        # How many prices the last migration brought to the shipped table (for the CLI).
        self.prices_refreshed = 0
        # The writer version: the newest schema version this package knows.
        self._version = max(migrations)
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._checked = 0  # the schema version whose tables were checked on this connection
        self._lock = threading.Lock()

    # -- registration -------------------------------------------------------------

    def availability(self) -> str | None:
        if self._unavailable is not None:
            return self._unavailable
        if self._dsn is None:
            return ("no database configured: set dsn or dsn_env in "
                    "[plugins.postgres-destination] (exporting is opt-in, since rows "
                    "leave the store)")
        return _dsn_problem(self._dsn)

    @property
    def key(self) -> str:
        """Where this destination writes, for the ref cache: host, port, database and
        schema (never the role or password). libpq's ``PG*`` variables fill in what
        the dsn leaves out."""
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(self._dsn or "")
        parts = [str(given.get(k) or os.environ.get(env, ""))
                 for k, env in (("host", "PGHOST"), ("port", "PGPORT"), ("dbname", "PGDATABASE"))]
        return f"postgres:{parts[0]}:{parts[1]}/{parts[2]}#{self.schema}"

    def close(self) -> None:
        """Close the connection, if one is open."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- the Destination protocol -------------------------------------------------

    def published(self, stream: str, origin: str) -> Ref:
        """The position held from ``origin`` and the identities it publishes for
        ``stream``; ``Ref()`` before its first push, or before the schema exists.
        Reads only: it neither creates nor migrates the schema."""
        from psycopg import sql

        def read(conn: psycopg.Connection[tuple[Any, ...]]) -> Ref:
            version = self._ready_to_read(conn)
            if not version:
                return Ref()
            schema = sql.Identifier(self.schema)
            if version >= 2:
                # Trusted only if the database holds the origin for this role: from
                # version 2 nobody else can have written its refs row.
                self._check_owner(conn, schema, origin)
            row = conn.execute(sql.SQL(
                "SELECT position, context, terms, decisions FROM {}.refs "
                "WHERE stream = %s AND origin = %s").format(schema),
                (stream, origin)).fetchone()
            return Ref() if row is None else _ref(row)

        return self._read(read, "reading the published ref")

    def instance(self) -> str:
        """The id created with the schema and never reused; ``""`` before it exists."""
        from psycopg import sql

        def read(conn: psycopg.Connection[tuple[Any, ...]]) -> str:
            if not self._ready_to_read(conn):
                return ""
            row = conn.execute(sql.SQL("SELECT instance FROM {}.destination").format(
                sql.Identifier(self.schema))).fetchone()
            if row is None:
                raise PostgresDestinationError(
                    "schema_altered", f"table {self.schema}.destination holds no identity "
                    "row: it was altered by hand; restore it from a backup")
            return str(row[0])

        return self._read(read, "reading the destination's identity")

    def push(self, batch: ExportBatch) -> Ref:
        """Apply ``batch`` in one transaction (see the module docstring) and return the
        ref now published for its origin."""
        import psycopg

        with self._lock:
            conn, _ = self._connection()
            try:
                self._ready_to_write(conn)
                with conn.transaction():
                    return self._push(conn, batch)
            except psycopg.Error as exc:
                raise self._failed(explain(exc, broken=conn.broken, during="the push",
                                           rows=len(batch.rows))) from None
            except PostgresDestinationError as exc:
                raise self._failed(exc) from None

    def migrate(self) -> tuple[int, int]:
        """Create or migrate the schema to this package's newest version, whether or
        not there is anything to push (run as the database owner), and refresh its
        prices from hostcore's shipped table (:attr:`prices_refreshed` counts them).
        Returns (version found, version now); a schema already as new or newer is
        left as it is."""
        import psycopg

        with self._lock:
            conn, _ = self._connection()
            try:
                found, now = self._migrate(conn)
                check_tables(conn, self.schema, now)
                self._checked = now
            except psycopg.Error as exc:
                raise self._failed(explain(exc, broken=conn.broken,
                                           during="the migration")) from None
            except PostgresDestinationError as exc:
                raise self._failed(exc) from None
        return found, now

    # -- internals ----------------------------------------------------------------

    def _push(self, conn: psycopg.Connection[tuple[Any, ...]], batch: ExportBatch) -> Ref:
        from psycopg import sql

        schema = sql.Identifier(self.schema)
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (lock_key(self.schema),))
        version, min_writer, instance, held = self._lock_ref(conn, schema, batch.stream,
                                                             batch.origin)
        refuse_writer(version, min_writer, self.schema, self._version)
        check_continuity(batch, instance, held.content)
        governed = apply_governance(held, batch)  # raises Conflict before any write
        rows = _rows_past(batch.rows, held.content)
        position = rows[-1].position if rows else held.content
        if rows:
            self._copy(conn, schema, batch, rows)
        if rows or governed != held:
            conn.execute(sql.SQL(
                "UPDATE {}.refs SET position = %s, context = %s, terms = %s, decisions = %s, "
                "pushed_by = current_user, pushed_at = now() "
                "WHERE stream = %s AND origin = %s").format(schema),
                (position, governed.context, governed.terms, governed.decisions,
                 batch.stream, batch.origin))
        return msgspec.structs.replace(governed, content=position)

    def _lock_ref(self, conn: psycopg.Connection[tuple[Any, ...]], schema: Any, stream: str,
                  origin: str) -> tuple[int, int, str, Ref]:
        """(schema version, oldest writer it admits, instance id, the origin's ref), its
        refs row locked."""
        from psycopg import sql

        select = sql.SQL(
            "SELECT (SELECT version FROM {0}.schema_version), "
            "(SELECT coalesce((to_jsonb(s) ->> 'min_writer_version')::integer, 1) "
            "FROM {0}.schema_version s), "
            "(SELECT instance FROM {0}.destination), position, context, terms, decisions "
            "FROM {0}.refs WHERE stream = %s AND origin = %s FOR UPDATE").format(schema)
        row = conn.execute(select, (stream, origin)).fetchone()
        if row is None:  # an origin's first push
            conn.execute(sql.SQL("INSERT INTO {}.refs (stream, origin) VALUES (%s, %s) "
                                 "ON CONFLICT DO NOTHING").format(schema), (stream, origin))
            row = conn.execute(select, (stream, origin)).fetchone()
        assert row is not None, "the refs row exists: it was just inserted"
        if row[0] is None or row[2] is None:
            raise PostgresDestinationError(
                "schema_altered", f"table {self.schema}.schema_version or "
                f"{self.schema}.destination lost its row: altered by hand; restore it")
        return int(row[0]), int(row[1]), str(row[2]), _ref(row[3:])

    def _check_owner(self, conn: psycopg.Connection[tuple[Any, ...]], schema: Any,
                     origin: str) -> None:
        """Raise ``origin_taken`` when the database holds ``origin`` for another role."""
        from psycopg import sql

        row = conn.execute(sql.SQL("SELECT {}.origin_role(%s), session_user").format(schema),
                           (origin,)).fetchone()
        assert row is not None, "a SELECT without FROM returns one row"
        holder, me = row
        if holder is not None and holder != me:
            raise PostgresDestinationError(
                "origin_taken", f"the database holds this store's origin {origin} for role "
                f"{holder}, not for {me}, so what it publishes for it cannot be trusted and "
                "this role cannot push to it; the database owner must check who claimed it "
                "(see docs/postgres.md)")

    def _copy(self, conn: psycopg.Connection[tuple[Any, ...]], schema: Any,
              batch: ExportBatch, rows: list[ExportRow]) -> None:
        import psycopg
        from psycopg import sql

        statement = sql.SQL("COPY {}.rows ({}) FROM STDIN (FORMAT BINARY)").format(
            schema, sql.SQL(", ").join(map(sql.Identifier, _COPY_COLUMNS)))
        stream, origin = batch.stream, batch.origin
        with conn.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(list(_COPY_TYPES))
            write = copy.write_row
            try:
                for r in rows:
                    write((stream, origin, r.position, r.partition, r.source_id,
                           r.session_id, r.ts, r.directory, r.git_remote, r.payload, r.key))
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
                # The connection is gone: leaving the block normally lets the copy's
                # end raise that (psycopg would otherwise log a warning line of its
                # own while it discards the second error, and a failure is one line).

    def _ready_to_read(self, conn: psycopg.Connection[tuple[Any, ...]]) -> int:
        """The schema's version, ``0`` when it does not exist yet; raises when it admits
        no writer this old, or a table is altered."""
        version, min_writer = read_version(conn, self.schema)
        if version == 0:
            return 0
        refuse_writer(version, min_writer, self.schema, self._version)
        if self._checked != version:
            check_tables(conn, self.schema, version)
            self._checked = version
        return version

    def _ready_to_write(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Create the schema if there is none; an existing one is written as it is,
        older or newer (``hostcore postgres migrate`` migrates it: a push never
        does, so a rolling upgrade's hosts keep pushing meanwhile). The version is
        read on every push, so a schema dropped or migrated meanwhile is noticed;
        the tables are checked once per connection and version."""
        version, min_writer = read_version(conn, self.schema)
        if version == 0:
            _, version = self._migrate(conn)
        refuse_writer(version, min_writer, self.schema, self._version)
        if self._checked != version:
            check_tables(conn, self.schema, version)
            self._checked = version

    def _migrate(self, conn: psycopg.Connection[tuple[Any, ...]]) -> tuple[int, int]:
        found, now, self.prices_refreshed = migrate(conn, self.schema, self._migrations)
        if found != now and self._emit is not None:
            self._emit("postgres_destination.migrated", from_version=found, to_version=now)
        return found, now

    def _read(self, read: Callable[[psycopg.Connection[tuple[Any, ...]]], T], during: str) -> T:
        """Run ``read``; a reused connection the server dropped is replaced once."""
        import psycopg

        with self._lock:
            conn, fresh = self._connection()
            try:
                try:
                    return read(conn)
                except psycopg.OperationalError:
                    if fresh or not conn.broken:
                        raise
                conn, _ = self._connection()  # the idle connection was dropped: a new one
                return read(conn)
            except psycopg.Error as exc:
                raise self._failed(explain(exc, broken=conn.broken, during=during)) from None
            except PostgresDestinationError as exc:
                raise self._failed(exc) from None

    def _connection(self) -> tuple[psycopg.Connection[tuple[Any, ...]], bool]:
        """(the open connection, whether it was just opened). Callers hold the lock."""
        import psycopg

        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn, False
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        reason = self.availability()
        if reason is not None:
            raise self._failed(PostgresDestinationError("refused", reason))
        assert self._dsn is not None, "availability() checked the dsn"
        try:
            # prepare_threshold=None: no server-side prepared statements, so a
            # transaction-pooling PgBouncer in front of the server works (docs/fleet.md).
            conn = psycopg.connect(self._dsn, autocommit=True, prepare_threshold=None,
                                   **_connect_defaults(self._dsn))
        except psycopg.Error as exc:
            raise self._failed(explain_connect(exc)) from None
        conn.adapters.register_dumper(None, _raw_json_dumper())
        self._conn, self._checked = conn, 0
        return conn, True

    def _failed(self, error: PostgresDestinationError) -> PostgresDestinationError:
        if self._emit is not None:
            self._emit("postgres_destination.failed", kind=error.kind)
        return error


def _ref(row: tuple[Any, ...]) -> Ref:
    position, context, terms, decisions = row
    return Ref(content=int(position), context=str(context), terms=str(terms),
               decisions=str(decisions))


def _rows_past(rows: list[ExportRow], position: int) -> list[ExportRow]:
    """The rows after ``position``, checked to ascend; rows at or below it are dropped."""
    start = 0
    while start < len(rows) and rows[start].position <= position:
        start += 1
    last = position
    for row in rows[start:] if start else rows:
        if row.position <= last:
            raise PostgresDestinationError(
                "refused", f"batch rows are not in ascending position order at position "
                f"{row.position}; nothing was written")
        last = row.position
    return rows[start:] if start else rows


def _dsn_problem(dsn: str) -> str | None:
    """Why ``dsn`` is not a connection string libpq accepts, or None.

    libpq's own message can quote part of the string (a password among it), so
    only its "invalid option" message, which quotes an option name, is passed on.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        said = str(exc).strip()
        detail = f" ({said})" if said.startswith("invalid connection option") else ""
        return (f"the configured dsn is not a libpq connection string{detail}: use "
                "key=value pairs or a postgresql:// URI")
    return None


def _connect_defaults(dsn: str) -> dict[str, Any]:
    """Connection options hostcore sets unless the dsn or a PG* variable already does."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(dsn)
    defaults: dict[str, Any] = {}
    if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
        defaults["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    if "application_name" not in given and "PGAPPNAME" not in os.environ:
        defaults["application_name"] = APPLICATION_NAME
    return defaults


@functools.cache
def _raw_json_dumper() -> type:
    """A binary dumper sending a row's raw JSON payload as ``json`` byte for byte.

    (The binary form of ``json`` is its text, so the payload crosses unparsed
    and unchanged.)
    """
    from psycopg import adapt, pq

    class RawJsonDumper(adapt.Dumper):
        oid = 114  # json
        format = pq.Format.BINARY

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    return RawJsonDumper
