"""The destination's tables: creation, migration, and the check that they are as defined.

Everything lives in one PostgreSQL schema (``hostcore`` unless configured):

* ``schema_version`` — one row: the version of this layout the database holds,
  and ``min_writer_version``, the oldest writer that may still push to it;
* ``destination`` — one row created with the schema: the destination's
  ``instance`` id, never reused, so a replaced database is noticed;
* ``origins`` — each origin and the role that first claimed it, written once;
* ``refs`` — one row per (stream, origin): the position held durably from that
  store and the governance identities that origin publishes, writable by the
  origin's role only (row-level security and a trigger);
* ``rows`` — the exported rows, keyed by (stream, origin, position); a trigger
  refuses a statement inserting a row whose origin is not the inserting role's;
* ``pushes`` — one audit line per push, written by the push's own ``COPY``;
* ``exported`` — a view of ``pushes``: "what left which machine, when".

:data:`MIGRATIONS` maps each version to the statements that reach it from the
one before; version 1 creates the tables. :func:`migrate` applies the missing
ones in one transaction under an advisory lock, so hosts starting together on a
fresh database create it once, and a failed migration leaves the previous
version whole. Versions are additive: a writer knowing only older versions
keeps pushing to a newer schema unless that schema's ``min_writer_version`` is
newer than the writer (:func:`refuse_writer`), and then nothing is written.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, LiteralString, NoReturn

from hostcore_postgres.errors import PostgresDestinationError, server_said

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 3

# Statements per version; ``{schema}`` is the quoted schema name,
# ``{instance}`` a new identity and ``{prices}`` hostcore's shipped price table as
# JSON (literals). Version 1 creates the tables; every
# later version is additive: a writer of an older version keeps writing to it
# unless the version raises ``min_writer_version`` (a statement of its own).
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
    # Version 2: each origin belongs to the role that first claimed it, and the
    # database, not each machine's honesty, keeps every machine's rows and refs its
    # own. Every check is server-side, so the statements a push sends are those of
    # version 1: writers of version 1 keep working (min_writer_version stays 1).
    # The identity checked is session_user, the login: inside a SECURITY DEFINER
    # function current_user is the function's owner, and both must agree. The
    # guards raise SQLSTATE HC001 (the origin is another role's) and HC002 (a
    # position moving back, a row changing origin): errors.py names them.
    2: (
        # Taken in the order a push takes them, so no push is in flight while the
        # backfills below read refs and rows, and none deadlocks with the migration.
        "LOCK TABLE {schema}.schema_version IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE {schema}.refs, {schema}.rows IN SHARE ROW EXCLUSIVE MODE",
        "ALTER TABLE {schema}.schema_version "
        "ADD COLUMN min_writer_version integer NOT NULL DEFAULT 1",
        """CREATE TABLE {schema}.origins (
               origin text PRIMARY KEY,
               role name NOT NULL,
               claimed_at timestamp with time zone NOT NULL DEFAULT now())""",
        # Origins pushed under version 1 go to the role that pushed them last: the
        # only evidence version 1 kept (status names the role, so a wrong one shows).
        """INSERT INTO {schema}.origins (origin, role, claimed_at)
               SELECT DISTINCT ON (origin) origin, pushed_by, pushed_at
               FROM {schema}.refs ORDER BY origin, pushed_at DESC""",
        """CREATE TABLE {schema}.pushes (
               role name NOT NULL,
               stream text NOT NULL,
               origin text NOT NULL,
               first_position bigint NOT NULL,
               last_position bigint NOT NULL,
               rows bigint NOT NULL,
               pushed_at timestamp with time zone NOT NULL DEFAULT now())""",
        "CREATE INDEX pushes_pushed_at ON {schema}.pushes USING brin (pushed_at)",
        """INSERT INTO {schema}.pushes (role, stream, origin, first_position, last_position,
                                        rows, pushed_at)
               SELECT o.role, r.stream, r.origin, min(r.position), max(r.position), count(*),
                      r.pushed_at
               FROM {schema}.rows r JOIN {schema}.origins o USING (origin)
               GROUP BY o.role, r.stream, r.origin, r.pushed_at""",
        # Written once: the first claim stands, and nobody but this function writes.
        """CREATE FUNCTION {schema}.claim_origin(claimed text) RETURNS name
               LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
           BEGIN
               INSERT INTO {schema}.origins (origin, role) VALUES (claimed, session_user)
                   ON CONFLICT (origin) DO NOTHING;
               RETURN (SELECT o.role FROM {schema}.origins o WHERE o.origin = claimed);
           END $$""",
        # VOLATILE, not STABLE: a stable function reads the snapshot its statement
        # started with, which does not hold the claim that statement's trigger made.
        """CREATE FUNCTION {schema}.origin_role(claimed text) RETURNS name
               LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
           $$ SELECT o.role FROM {schema}.origins o WHERE o.origin = claimed $$""",
        """CREATE FUNCTION {schema}.owns(claimed text) RETURNS boolean
               LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
           $$ SELECT EXISTS (SELECT FROM {schema}.origins o
                             WHERE o.origin = claimed AND o.role = session_user) $$""",
        "REVOKE ALL ON FUNCTION {schema}.claim_origin(text) FROM PUBLIC",
        # A refs row is inserted by an origin's first push: that claims the origin.
        # Then only its role may change it, the position only forward, and pushed_by
        # always says who did.
        """CREATE FUNCTION {schema}.refs_guard() RETURNS trigger
               LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
           DECLARE holder name;
           BEGIN
               IF TG_OP = 'INSERT' THEN
                   holder := {schema}.claim_origin(NEW.origin);
               ELSE
                   IF NEW.origin <> OLD.origin OR NEW.stream <> OLD.stream THEN
                       RAISE EXCEPTION 'a refs row keeps its stream and origin'
                           USING ERRCODE = 'HC002';
                   END IF;
                   IF NEW.position < OLD.position THEN
                       RAISE EXCEPTION 'the position of origin % may only move forward '
                           '(from % to %)', OLD.origin, OLD.position, NEW.position
                           USING ERRCODE = 'HC002';
                   END IF;
                   holder := {schema}.origin_role(OLD.origin);
               END IF;
               IF holder IS DISTINCT FROM session_user THEN
                   RAISE EXCEPTION 'origin % belongs to role %, not to %', NEW.origin,
                       holder, session_user USING ERRCODE = 'HC001';
               END IF;
               NEW.pushed_by := session_user;
               RETURN NEW;
           END $$""",
        """CREATE TRIGGER refs_guard BEFORE INSERT OR UPDATE ON {schema}.refs
               FOR EACH ROW EXECUTE FUNCTION {schema}.refs_guard()""",
        "ALTER TABLE {schema}.refs ENABLE ROW LEVEL SECURITY",
        """CREATE POLICY own_origin ON {schema}.refs
               USING ({schema}.owns(origin)) WITH CHECK ({schema}.owns(origin))""",
        # Row-level security would do for rows too, but PostgreSQL refuses COPY FROM
        # into a table with it. A statement trigger works under COPY and sees the
        # statement's rows at once: it refuses the whole statement (nothing of it
        # stays) if one row's origin is not the inserting role's, then writes the
        # push's audit line, so no role ever writes one of its own. A BEFORE trigger
        # per row would do the same check but measured 2.5x slower to COPY
        # (docs/benchmarks.md).
        """CREATE FUNCTION {schema}.rows_guard() RETURNS trigger
               LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
           DECLARE stranger text;
           BEGIN
               SELECT p.origin INTO stranger FROM pushed p
                   WHERE NOT EXISTS (SELECT FROM {schema}.origins o
                                     WHERE o.origin = p.origin AND o.role = session_user)
                   LIMIT 1;
               IF FOUND THEN
                   RAISE EXCEPTION 'origin % belongs to role %, not to %', stranger,
                       {schema}.origin_role(stranger), session_user USING ERRCODE = 'HC001';
               END IF;
               INSERT INTO {schema}.pushes (role, stream, origin, first_position,
                                            last_position, rows)
                   SELECT session_user, p.stream, p.origin, min(p.position),
                          max(p.position), count(*)
                   FROM pushed p GROUP BY p.stream, p.origin;
               RETURN NULL;
           END $$""",
        """CREATE TRIGGER rows_guard AFTER INSERT ON {schema}.rows
               REFERENCING NEW TABLE AS pushed
               FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_guard()""",
        """CREATE OR REPLACE VIEW {schema}.exported AS
               SELECT p.role AS machine, p.origin, p.stream, p.pushed_at,
                      p.rows, p.first_position, p.last_position
               FROM {schema}.pushes p""",
    ),
    # Version 3: usage across machines. Views and a price table only, read by
    # nothing a push does: writers of every version keep pushing (min_writer_version
    # stays 1). The cost is worked out here, from the prices the database holds, as
    # `hostcore usage` works it out from the host's at read time (not carried on the
    # rows): a price the owner corrects applies to every day already pushed.
    3: (
        "LOCK TABLE {schema}.schema_version IN ACCESS EXCLUSIVE MODE",
        # US dollars per per_tokens tokens of each kind, and of a response's tokens
        # past the long-context threshold (the same as below it when the model has
        # no such tier), as hostcore's prices.json gives them.
        """CREATE TABLE {schema}.prices (
               model text PRIMARY KEY,
               input double precision NOT NULL,
               output double precision NOT NULL,
               cache_creation double precision NOT NULL,
               cache_read double precision NOT NULL,
               above_input double precision NOT NULL,
               above_output double precision NOT NULL,
               above_cache_creation double precision NOT NULL,
               above_cache_read double precision NOT NULL,
               per_tokens bigint NOT NULL,
               as_of text NOT NULL)""",
        # Filled by REFRESH_PRICES, which every migration runs once prices exist.
        # One line per API response, counted once per store as the store counts it
        # (hostcore.evidence.usage_totals): the row of the lowest position naming a
        # response counts it, a usage not of hostcore's shape (another source's own)
        # counts nothing. Rows are keyed by (stream, origin, position), so a re-push
        # adds no line. The day is the UTC day of the row's time (rows' times are
        # UTC). The cost is at the prices of the response's model, looked up as
        # hostcore's PriceTable.price_of does: the name, then without its release
        # date, then without a provider prefix, then without both; NULL when none is
        # priced, never a guess.
        """CREATE VIEW {schema}.usage_responses AS
               SELECT u.*,
                      ((u.input_tokens - u.input_above_tier) * p.input
                       + u.input_above_tier * p.above_input
                       + (u.output_tokens - u.output_above_tier) * p.output
                       + u.output_above_tier * p.above_output
                       + (u.cache_creation_input_tokens - u.cache_creation_above_tier)
                         * p.cache_creation
                       + u.cache_creation_above_tier * p.above_cache_creation
                       + (u.cache_read_input_tokens - u.cache_read_above_tier) * p.cache_read
                       + u.cache_read_above_tier * p.above_cache_read) / p.per_tokens
                          AS cost_usd
               FROM (SELECT DISTINCT ON (r.origin, r.payload -> 'usage' ->> 'response')
                          coalesce(o.role, r.origin::name) AS machine, r.origin, r.stream,
                          r.position, r.source_id, r.session_id, r.directory, r.ts,
                          left(r.ts, 10)::date AS day,
                          r.payload -> 'usage' ->> 'model' AS model,
                          (r.payload -> 'usage' ->> 'input_tokens')::bigint AS input_tokens,
                          (r.payload -> 'usage' ->> 'output_tokens')::bigint AS output_tokens,
                          (r.payload -> 'usage' ->> 'cache_creation_input_tokens')::bigint
                              AS cache_creation_input_tokens,
                          (r.payload -> 'usage' ->> 'cache_read_input_tokens')::bigint
                              AS cache_read_input_tokens,
                          coalesce((r.payload -> 'usage' -> 'above_tier' ->> 0)::bigint, 0)
                              AS input_above_tier,
                          coalesce((r.payload -> 'usage' -> 'above_tier' ->> 1)::bigint, 0)
                              AS output_above_tier,
                          coalesce((r.payload -> 'usage' -> 'above_tier' ->> 2)::bigint, 0)
                              AS cache_creation_above_tier,
                          coalesce((r.payload -> 'usage' -> 'above_tier' ->> 3)::bigint, 0)
                              AS cache_read_above_tier
                   FROM {schema}.rows r LEFT JOIN {schema}.origins o ON o.origin = r.origin
                   WHERE json_typeof(r.payload -> 'usage') = 'object'
                     AND json_typeof(r.payload -> 'usage' -> 'model') = 'string'
                     AND json_typeof(r.payload -> 'usage' -> 'response') = 'string'
                     -- integers, as JSON numbers (a quoted "12" is text, 1.5 no count)
                     AND NOT EXISTS (
                         SELECT FROM (VALUES (r.payload -> 'usage' -> 'input_tokens'),
                                             (r.payload -> 'usage' -> 'output_tokens'),
                                             (r.payload -> 'usage'
                                                  -> 'cache_creation_input_tokens'),
                                             (r.payload -> 'usage'
                                                  -> 'cache_read_input_tokens')) AS k(n)
                         WHERE json_typeof(k.n) IS DISTINCT FROM 'number'
                            OR k.n::text !~ '^-?[0-9]{{1,18}}$')
                     AND (r.payload -> 'usage' -> 'above_tier' IS NULL
                          OR (json_typeof(r.payload -> 'usage' -> 'above_tier') = 'array'
                              AND json_array_length(r.payload -> 'usage' -> 'above_tier') = 4
                              AND NOT EXISTS (
                                  SELECT FROM json_array_elements(
                                      r.payload -> 'usage' -> 'above_tier') AS a(n)
                                  WHERE json_typeof(a.n) <> 'number'
                                     OR a.n::text !~ '^-?[0-9]{{1,18}}$')))
                     AND r.ts ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T'
                   ORDER BY r.origin, r.payload -> 'usage' ->> 'response', r.position) u
               LEFT JOIN LATERAL (
                   SELECT q.* FROM {schema}.prices q,
                          (VALUES (u.model, 1),
                                  (regexp_replace(u.model, '-[0-9]{{8}}$', ''), 2),
                                  (regexp_replace(u.model, '^(anthropic|openai)[/.]', ''), 3),
                                  (regexp_replace(regexp_replace(
                                       u.model, '^(anthropic|openai)[/.]', ''),
                                       '-[0-9]{{8}}$', ''), 4)) AS n(name, rank)
                   WHERE q.model = n.name ORDER BY n.rank LIMIT 1) p ON true""",
        """CREATE VIEW {schema}.usage_daily AS
               SELECT machine, day, model,
                      sum(input_tokens)::bigint AS input_tokens,
                      sum(output_tokens)::bigint AS output_tokens,
                      sum(cache_creation_input_tokens)::bigint AS cache_creation_input_tokens,
                      sum(cache_read_input_tokens)::bigint AS cache_read_input_tokens,
                      sum(cost_usd) AS cost_usd
               FROM {schema}.usage_responses
               GROUP BY machine, day, model""",
    ),
}

# What each table must have, as pg_catalog's format_type() spells the types, from
# the version that added it. Extra columns are tolerated when an insert can leave
# them out (nullable or with a default); anything else means the table was
# altered by hand.
_TABLES: Mapping[int, Mapping[str, Mapping[str, str]]] = {
    1: {
        "schema_version": {"singleton": "boolean", "version": "integer",
                           "migrated_at": "timestamp with time zone"},
        "destination": {"singleton": "boolean", "instance": "text",
                        "created_at": "timestamp with time zone"},
        "refs": {"stream": "text", "origin": "text", "position": "bigint", "context": "text",
                 "terms": "text", "decisions": "text", "pushed_by": "name",
                 "pushed_at": "timestamp with time zone"},
        "rows": {"stream": "text", "origin": "text", "position": "bigint",
                 "partition": "text", "source_id": "text", "session_id": "text",
                 "ts": "text", "directory": "text", "git_remote": "text",
                 "payload": "json", "key": "text", "pushed_at": "timestamp with time zone"},
    },
    2: {
        "schema_version": {"min_writer_version": "integer"},
        "origins": {"origin": "text", "role": "name",
                    "claimed_at": "timestamp with time zone"},
        "pushes": {"role": "name", "stream": "text", "origin": "text",
                   "first_position": "bigint", "last_position": "bigint", "rows": "bigint",
                   "pushed_at": "timestamp with time zone"},
      },
    3: {
        "prices": {"model": "text", "input": "double precision", "output": "double precision",
                   "cache_creation": "double precision", "cache_read": "double precision",
                   "above_input": "double precision", "above_output": "double precision",
                   "above_cache_creation": "double precision",
                   "above_cache_read": "double precision", "per_tokens": "bigint",
                   "as_of": "text"},
    },
}
# The version that created ``prices``: from it on, every migration refreshes them.
PRICES_VERSION = 3
# hostcore's shipped price table (``{prices}``) as rows of ``prices``: a kind a
# model's entry leaves out costs nothing, as in hostcore's Price.
_SHIPPED_PRICES = """
    SELECT m.key AS model, p.input, p.output, coalesce(p.cache_creation, 0) AS cache_creation,
           coalesce(p.cache_read, 0) AS cache_read,
           coalesce(t.input, p.input) AS above_input, coalesce(t.output, p.output) AS above_output,
           CASE WHEN t.tiered THEN coalesce(t.cache_creation, 0)
                ELSE coalesce(p.cache_creation, 0) END AS above_cache_creation,
           CASE WHEN t.tiered THEN coalesce(t.cache_read, 0)
                ELSE coalesce(p.cache_read, 0) END AS above_cache_read,
           ({prices}::json ->> 'per_tokens')::bigint AS per_tokens,
           {prices}::json ->> 'as_of' AS as_of
    FROM json_each({prices}::json -> 'models') m
    CROSS JOIN LATERAL json_to_record(m.value) AS p(
        input double precision, output double precision,
        cache_creation double precision, cache_read double precision)
    CROSS JOIN LATERAL (
        SELECT m.value -> 'above_tier' IS NOT NULL AS tiered, a.*
        FROM json_to_record(coalesce(m.value -> 'above_tier', '{{}}'))
            AS a(input double precision, output double precision,
                 cache_creation double precision, cache_read double precision)
    ) t"""
# Whether the shipped table has a model ``prices`` lacks, or one it holds at an
# older ``as_of``: then a migration has prices to refresh, whatever the version.
PRICES_BEHIND: LiteralString = (
    "SELECT count(*) FROM (" + _SHIPPED_PRICES + ") s "
    "LEFT JOIN {schema}.prices held ON held.model = s.model "
    "WHERE held.model IS NULL OR held.as_of < s.as_of")
# The refresh: an upsert of the shipped table. A price is replaced only by one of a
# later ``as_of``, so running it again changes nothing, and a price the owner put
# there dated on or after the shipped table (a host's override) stays. Models the
# shipped table no longer has stay too: rows pushed under them keep their cost.
REFRESH_PRICES: LiteralString = (
    "INSERT INTO {schema}.prices AS held " + _SHIPPED_PRICES + """
    ON CONFLICT (model) DO UPDATE SET
        input = excluded.input, output = excluded.output,
        cache_creation = excluded.cache_creation, cache_read = excluded.cache_read,
        above_input = excluded.above_input, above_output = excluded.above_output,
        above_cache_creation = excluded.above_cache_creation,
        above_cache_read = excluded.above_cache_read,
        per_tokens = excluded.per_tokens, as_of = excluded.as_of
    WHERE held.as_of < excluded.as_of""")
# The primary keys that make a rerun unable to duplicate a row or a ref. A key
# with more columns is accepted: a table partitioned by month must add its
# partition column (docs/fleet.md); the refs position, locked in the push's
# transaction, is what drops rows already held.
PRIMARY_KEYS: Mapping[str, tuple[str, ...]] = {
    "refs": ("stream", "origin"),
    "rows": ("stream", "origin", "position"),
    "origins": ("origin",),
}
# What keeps each machine's rows and refs its own from version 2: the triggers
# (enabled) and row-level security on refs. Without them the database enforces
# nothing, and a machine's status would rest on every other machine's honesty.
GUARD_TRIGGERS: Mapping[str, tuple[str, ...]] = {
    "refs": ("refs_guard",),
    "rows": ("rows_guard",),
}


def columns(version: int) -> dict[str, dict[str, str]]:
    """The tables and columns a schema of ``version`` has (for a newer version: those
    of the newest this package knows, which later versions only add to)."""
    merged: dict[str, dict[str, str]] = {}
    for since, tables in sorted(_TABLES.items()):
        if since <= version:
            for table, cols in tables.items():
                merged.setdefault(table, {}).update(cols)
    return merged


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
_GUARDS_SQL = """
    SELECT c.relname, c.relrowsecurity,
           coalesce(array_agg(t.tgname::text) FILTER (WHERE t.tgenabled <> 'D'), '{}')
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
    WHERE n.nspname = %s AND c.relname = ANY(%s)
    GROUP BY c.relname, c.relrowsecurity
"""
_VERSION_TABLE_SQL = """
    SELECT 1 FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relname = 'schema_version'
"""
# The version row whichever version wrote it: version 1 has no min_writer_version.
VERSION_ROW_SQL: LiteralString = (
    "SELECT s.version, coalesce((to_jsonb(s) ->> 'min_writer_version')::integer, 1) "
    "FROM {}.schema_version s")


def read_version(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> tuple[int, int]:
    """(the version the database holds in ``schema``, the oldest writer it admits);
    ``(0, 0)`` when there is none yet.

    Reads the catalog first, so a database without the schema answers ``0``
    whatever the role may see.
    """
    from psycopg import sql

    if conn.execute(_VERSION_TABLE_SQL, (schema,)).fetchone() is None:
        return 0, 0
    row = conn.execute(sql.SQL(VERSION_ROW_SQL).format(sql.Identifier(schema))).fetchone()
    if row is None:
        raise PostgresDestinationError(
            "schema_altered", f"table {schema}.schema_version holds no version: it was "
            "altered by hand; restore it from a backup (see docs/postgres.md)")
    return int(str(row[0])), int(str(row[1]))


def refuse_writer(version: int, min_writer: int, schema: str, writer: int) -> None:
    """Raise when the schema admits no writer as old as ``writer`` (this package's
    newest version); a newer schema that still admits it is written to."""
    if min_writer > writer:
        raise PostgresDestinationError(
            "schema_newer", f"the database's {schema} schema is version {version} and "
            f"admits writers of version {min_writer} or newer; this hostcore-postgres "
            f"writes as version {writer}, older: upgrade hostcore-postgres on this "
            "machine (nothing was written)")


def migrate(conn: psycopg.Connection[tuple[Any, ...]], schema: str,
            migrations: Mapping[int, tuple[LiteralString, ...]] = MIGRATIONS
            ) -> tuple[int, int, int]:
    """Bring ``schema`` to the newest version of ``migrations`` and its ``prices`` to
    hostcore's shipped table (:data:`REFRESH_PRICES`), in one transaction.

    Returns (version found, version now, prices refreshed). A schema already newer
    is left as it is (found == now) if it admits this writer; its prices are still
    refreshed, so a new price table shipped with the package reaches a database at
    any version. Raises :class:`PostgresDestinationError` when it admits no writer
    this old, or when this role may not create or alter it.
    """
    import psycopg
    from psycopg import sql

    target = max(migrations)
    found, min_writer = read_version(conn, schema)
    refuse_writer(found, min_writer, schema, target)
    names = {"schema": sql.Identifier(schema), "instance": sql.Literal(uuid.uuid4().hex),
             "prices": sql.Literal(_shipped_prices())}
    try:
        if found >= target and not _prices_behind(conn, found, names):
            return found, found, 0  # nothing to do: no lock taken, nothing written
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
            # another host may have done it meanwhile
            found, min_writer = read_version(conn, schema)
            refuse_writer(found, min_writer, schema, target)
            for version in range(found + 1, target + 1):
                for statement in migrations[version]:
                    conn.execute(sql.SQL(statement).format(**names))
            if found < target:
                conn.execute(sql.SQL(
                    "INSERT INTO {}.schema_version (version) VALUES (%s) ON CONFLICT "
                    "(singleton) DO UPDATE SET version = EXCLUDED.version, "
                    "migrated_at = now()").format(sql.Identifier(schema)), (target,))
            refreshed = 0
            if max(found, target) >= PRICES_VERSION:
                refreshed = conn.execute(sql.SQL(REFRESH_PRICES).format(**names)).rowcount
    except psycopg.errors.InsufficientPrivilege:
        if found == 0:
            raise PostgresDestinationError(
                "schema_missing", f"the {schema} schema does not exist in this database and "
                "this role may not create it; run `hostcore postgres migrate` once as the "
                "database owner (see docs/postgres.md)") from None
        if found >= target:
            raise PostgresDestinationError(
                "permission", f"the {schema} schema is at version {found}, and this role may "
                "not bring its prices to the table this package ships; run `hostcore "
                "postgres migrate` as the database owner (see docs/fleet.md)") from None
        raise PostgresDestinationError(
            "permission", f"the {schema} schema is at version {found}, older than {target}, "
            "and this role may not migrate it; run `hostcore postgres migrate` as the "
            "database owner (see docs/fleet.md)") from None
    except psycopg.Error as exc:
        if conn.broken:
            raise  # the connection, not the migration: reported as a lost connection
        raise PostgresDestinationError(
            "migration_failed", f"migrating the {schema} schema from version {found} to "
            f"{max(found, target)} failed ({server_said(exc)}); it was rolled back, so the "
            f"database stays at version {found}") from None
    return found, max(found, target), refreshed


def _prices_behind(conn: psycopg.Connection[tuple[Any, ...]], version: int,
                   names: Mapping[str, Any]) -> bool:
    """Whether a schema at ``version`` has prices older than the shipped table's."""
    from psycopg import sql

    if version < PRICES_VERSION:
        return False
    row = conn.execute(sql.SQL(PRICES_BEHIND).format(**names)).fetchone()
    return row is not None and int(str(row[0])) > 0


def check_tables(conn: psycopg.Connection[tuple[Any, ...]], schema: str, version: int) -> None:
    """Raise ``schema_altered`` unless every table of ``version`` has its columns, types
    and keys, and (from version 2) its guards are in force."""
    expected_tables = columns(version)
    found: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, type_, required in conn.execute(
            _COLUMNS_SQL, (schema, list(expected_tables))):
        found.setdefault(str(table), {})[str(column)] = (str(type_), bool(required))
    for table, expected in expected_tables.items():
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
        if table in expected_tables and not set(key) <= keys.get(table, set()):
            _altered(schema, table, f"lacks its primary key ({', '.join(key)})")
    if version >= 2:
        _check_guards(conn, schema)


def _check_guards(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> None:
    guards = {str(t): (bool(rls), set(names)) for t, rls, names in conn.execute(
        _GUARDS_SQL, (schema, list(GUARD_TRIGGERS)))}
    for table, triggers in GUARD_TRIGGERS.items():
        rls, enabled = guards.get(table, (False, set()))
        for trigger in triggers:
            if trigger not in enabled:
                _altered(schema, table, f"has its trigger {trigger} dropped or disabled, so "
                                        "the database no longer keeps each machine's rows "
                                        "its own")
        if table == "refs" and not rls:
            _altered(schema, table, "has row-level security disabled, so the database no "
                                    "longer keeps each machine's refs its own")


def _altered(schema: str, table: str, what: str) -> NoReturn:
    raise PostgresDestinationError(
        "schema_altered", f"table {schema}.{table} {what}: it was altered by hand; restore "
        "it as docs/postgres.md defines it (nothing was written)")


def _shipped_prices() -> str:
    """hostcore's price table, as JSON, for version 3's ``prices``."""
    # Here, not at the top: only a migration reads it (a push never does).
    from hostcore.evidence.prices import PRICES_FILE

    return PRICES_FILE.read_text("utf-8")


@functools.cache
def lock_key(schema: str) -> int:
    """The advisory lock of one schema, a signed 64-bit key: a migration holds it
    exclusively, each push shared, both before touching any table, so a migration
    waits for the pushes in flight and new pushes wait for it, and neither can hold
    a table the other waits for (a deadlock that aborts one of them)."""
    import hashlib  # here, not at the top: it loads OpenSSL (a cold start's 2-3 ms)

    digest = hashlib.sha256(f"hostcore-postgres:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
