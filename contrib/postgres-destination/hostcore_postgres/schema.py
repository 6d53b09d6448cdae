"""The destination's tables: creation, migration, and the check that they are as defined.

Everything lives in one PostgreSQL schema (``hostcore`` unless configured):

* ``schema_version`` — one row: the version of this layout the database holds;
* ``destination`` — one row created with the schema: the destination's
  ``instance`` id, never reused, so a replaced database is noticed;
* ``refs`` — one row per (stream, origin): the position held durably from that
  store and the governance identities that origin publishes, with the role that
  last pushed (``pushed_by``) and when;
* ``rows`` — the exported rows, keyed by (stream, origin, position);
* ``exported`` — a view: one row per push, "what left which machine, when".

:data:`MIGRATIONS` maps each version to the statements that reach it from the
one before; version 1 creates everything. :func:`migrate` applies the missing
ones in one transaction under an advisory lock, so hosts starting together on a
fresh database create it once, and a failed migration leaves the previous
version whole. A database at a newer version than :data:`SCHEMA_VERSION` is
refused, never written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, LiteralString, NoReturn

from hostcore_postgres.errors import PostgresDestinationError, server_said

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 1

# Statements per version; ``{schema}`` is the quoted schema name and
# ``{instance}`` a new identity (a literal). Version 1 creates everything.
MIGRATIONS: Mapping[int, tuple[LiteralString, ...]] = {
    1: (
        "CREATE SCHEMA IF NOT EXISTS {schema}",
        """CREATE TABLE {schema}.schema_version (
               singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
               version integer NOT NULL,
               migrated_at timestamp with time zone NOT NULL DEFAULT now())""",
        """CREATE TABLE {schema}.destination (
               singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
               instance text NOT NULL,
               created_at timestamp with time zone NOT NULL DEFAULT now())""",
        "INSERT INTO {schema}.destination (instance) VALUES ({instance})",
        """CREATE TABLE {schema}.refs (
               stream text NOT NULL,
               origin text NOT NULL,
               position bigint NOT NULL DEFAULT 0,
               context text NOT NULL DEFAULT '',
               terms text NOT NULL DEFAULT '',
               decisions text NOT NULL DEFAULT '',
               pushed_by name NOT NULL DEFAULT current_user,
               pushed_at timestamp with time zone NOT NULL DEFAULT now(),
               PRIMARY KEY (stream, origin))""",
        # payload is json, not jsonb: kept byte for byte as the store holds it
        # (jsonb reorders keys and refuses \\u0000), and measured 4x faster to COPY.
        """CREATE TABLE {schema}.rows (
               stream text NOT NULL,
               origin text NOT NULL,
               position bigint NOT NULL,
               partition text NOT NULL,
               source_id text NOT NULL,
               session_id text NOT NULL,
               ts text NOT NULL,
               directory text NOT NULL,
               git_remote text NOT NULL,
               payload json NOT NULL,
               key text,
               pushed_at timestamp with time zone NOT NULL DEFAULT now(),
               PRIMARY KEY (stream, origin, position))""",
        # Rows arrive in pushed_at order, so a BRIN index costs almost nothing on insert.
        "CREATE INDEX rows_pushed_at ON {schema}.rows USING brin (pushed_at)",
        # now() is the transaction's start and a push is one transaction, so
        # grouping by pushed_at gives one line per push.
        """CREATE VIEW {schema}.exported AS
               SELECT f.pushed_by AS machine, r.origin, r.stream, r.pushed_at,
                      count(*) AS rows, min(r.position) AS first_position,
                      max(r.position) AS last_position
               FROM {schema}.rows r JOIN {schema}.refs f USING (stream, origin)
               GROUP BY f.pushed_by, r.origin, r.stream, r.pushed_at""",
    ),
}

# What each table must have, as pg_catalog's format_type() spells the types.
# Extra columns are tolerated when an insert can leave them out (nullable or
# with a default); anything else means the table was altered by hand.
COLUMNS: Mapping[str, Mapping[str, str]] = {
    "schema_version": {"singleton": "boolean", "version": "integer",
                       "migrated_at": "timestamp with time zone"},
    "destination": {"singleton": "boolean", "instance": "text",
                    "created_at": "timestamp with time zone"},
    "refs": {"stream": "text", "origin": "text", "position": "bigint", "context": "text",
             "terms": "text", "decisions": "text", "pushed_by": "name",
             "pushed_at": "timestamp with time zone"},
    "rows": {"stream": "text", "origin": "text", "position": "bigint", "partition": "text",
             "source_id": "text", "session_id": "text", "ts": "text", "directory": "text",
             "git_remote": "text", "payload": "json", "key": "text",
             "pushed_at": "timestamp with time zone"},
}
# The primary keys that make a rerun unable to duplicate a row or a ref. A key
# with more columns is accepted: a table partitioned by month must add its
# partition column (docs/fleet.md); the refs position, locked in the push's
# transaction, is what drops rows already held.
PRIMARY_KEYS: Mapping[str, tuple[str, ...]] = {
    "refs": ("stream", "origin"),
    "rows": ("stream", "origin", "position"),
}

_COLUMNS_SQL = """
    SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
           a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
    FROM pg_catalog.pg_attribute a
    JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
"""
_PRIMARY_KEYS_SQL = """
    SELECT c.relname, array_agg(a.attname::text ORDER BY k.ord)
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
    JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
    WHERE i.indisprimary AND n.nspname = %s
    GROUP BY c.relname
"""
_VERSION_TABLE_SQL = """
    SELECT 1 FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relname = 'schema_version'
"""


def read_version(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> int:
    """The version the database holds in ``schema``; ``0`` when there is none yet.

    Reads the catalog first, so a database without the schema answers ``0``
    whatever the role may see.
    """
    from psycopg import sql

    if conn.execute(_VERSION_TABLE_SQL, (schema,)).fetchone() is None:
        return 0
    row = conn.execute(sql.SQL("SELECT version FROM {}.schema_version").format(
        sql.Identifier(schema))).fetchone()
    if row is None:
        raise PostgresDestinationError(
            "schema_altered", f"table {schema}.schema_version holds no version: it was "
            "altered by hand; restore it from a backup (see docs/postgres.md)")
    return int(str(row[0]))


def refuse_newer(version: int, schema: str, supported: int = SCHEMA_VERSION) -> None:
    """Raise when ``version`` is newer than this package understands."""
    if version > supported:
        raise PostgresDestinationError(
            "schema_newer", f"the database's {schema} schema is version {version}, newer "
            f"than version {supported}, the newest this hostcore-postgres understands; "
            "upgrade hostcore-postgres on this machine (nothing was written)")


def migrate(conn: psycopg.Connection[tuple[Any, ...]], schema: str,
            migrations: Mapping[int, tuple[LiteralString, ...]] = MIGRATIONS) -> tuple[int, int]:
    """Bring ``schema`` to the newest version of ``migrations``, in one transaction.

    Returns (version found, version now). Raises :class:`PostgresDestinationError`
    for a newer schema, or when this role may not create or alter it.
    """
    import psycopg
    from psycopg import sql

    target = max(migrations)
    found = read_version(conn, schema)
    refuse_newer(found, schema, target)
    if found == target:
        return found, found
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema),))
            found = read_version(conn, schema)  # another host may have done it meanwhile
            refuse_newer(found, schema, target)
            names = {"schema": sql.Identifier(schema),
                     "instance": sql.Literal(uuid.uuid4().hex)}
            for version in range(found + 1, target + 1):
                for statement in migrations[version]:
                    conn.execute(sql.SQL(statement).format(**names))
            conn.execute(sql.SQL(
                "INSERT INTO {}.schema_version (version) VALUES (%s) ON CONFLICT (singleton) "
                "DO UPDATE SET version = EXCLUDED.version, migrated_at = now()").format(
                    sql.Identifier(schema)), (target,))
    except psycopg.errors.InsufficientPrivilege:
        what = "does not exist" if found == 0 else f"is at version {found}, older than {target}"
        raise PostgresDestinationError(
            "schema_missing", f"the {schema} schema {what} in this database and this role may "
            "not create or migrate it; run `hostcore export` once as the database owner "
            "(see docs/postgres.md)") from None
    except psycopg.Error as exc:
        if conn.broken:
            raise  # the connection, not the migration: reported as a lost connection
        raise PostgresDestinationError(
            "migration_failed", f"migrating the {schema} schema from version {found} to "
            f"{target} failed ({server_said(exc)}); it was rolled back, so the database "
            f"stays at version {found}") from None
    return found, target


def check_tables(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> None:
    """Raise ``schema_altered`` unless every table has its columns, types and keys."""
    found: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, type_, required in conn.execute(_COLUMNS_SQL, (schema, list(COLUMNS))):
        found.setdefault(str(table), {})[str(column)] = (str(type_), bool(required))
    for table, expected in COLUMNS.items():
        held = found.get(table)
        if held is None:
            _altered(schema, table, "is missing")
        for column, type_ in expected.items():
            if column not in held:
                _altered(schema, table, f"has no column {column}")
            if held[column][0] != type_:
                _altered(schema, table, f"column {column} is {held[column][0]}, not {type_}")
        for column, (_, required) in held.items():
            if column not in expected and required:
                _altered(schema, table, f"has a column {column} that is NOT NULL without a "
                                        "default, so no insert can succeed")
    keys: dict[str, set[str]] = {
        str(t): set(k) for t, k in conn.execute(_PRIMARY_KEYS_SQL, (schema,))}
    for table, key in PRIMARY_KEYS.items():
        if not set(key) <= keys.get(table, set()):
            _altered(schema, table, f"lacks its primary key ({', '.join(key)})")


def _altered(schema: str, table: str, what: str) -> NoReturn:
    raise PostgresDestinationError(
        "schema_altered", f"table {schema}.{table} {what}: it was altered by hand; restore "
        "it as docs/postgres.md defines it (nothing was written)")


def _lock_key(schema: str) -> int:
    """The advisory lock serialising creators of one schema: a signed 64-bit key."""
    import hashlib  # here, not at the top: it loads OpenSSL (a cold start's 2-3 ms)

    digest = hashlib.sha256(f"hostcore-postgres:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
