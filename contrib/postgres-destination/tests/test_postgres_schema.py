"""The schema: created on first use, versioned, migrated whole or not at all, checked."""

from __future__ import annotations

import threading

import msgspec
import pytest
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.errors import PostgresDestinationError
from hostcore_postgres.schema import MIGRATIONS, SCHEMA_VERSION

from hostcore.export.batch import ExportBatch, ExportRow

ORIGIN = "feedface"


def batch(*positions: int, origin: str = ORIGIN) -> ExportBatch:
    return ExportBatch(stream="main", origin=origin, rows=[
        ExportRow(p, "sessions", "claude", "s", "2024-05-01T10:00:00.000000Z", "/w", "",
                  msgspec.Raw(b'{"n": %d}' % p)) for p in positions])


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, object]]] = []

    def __call__(self, name: str, **attributes: object) -> None:
        self.seen.append((name, attributes))


def version(pg, schema: str = "hostcore") -> int:
    return pg.query(f"SELECT version FROM {schema}.schema_version")[0][0]


def columns(pg, table: str) -> set[str]:
    rows = pg.query("SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = 'hostcore' AND table_name = %s", (table,))
    return {r[0] for r in rows}


@pytest.fixture
def make(pg):
    made: list[PostgresDestination] = []

    def build(**kwargs) -> PostgresDestination:
        destination = PostgresDestination(kwargs.pop("dsn", pg.dsn), **kwargs)
        made.append(destination)
        return destination

    yield build
    for destination in made:
        destination.close()


def test_reading_creates_nothing_and_the_first_push_creates_the_schema(pg, make):
    events = Events()
    destination = make(emit=events)
    assert destination.published("main", ORIGIN).content == 0
    assert destination.instance() == ""
    assert pg.query("SELECT count(*) FROM pg_namespace WHERE nspname = 'hostcore'") == [(0,)]
    destination.push(batch(1))
    assert version(pg) == SCHEMA_VERSION
    assert pg.query("SELECT count(*) FROM hostcore.destination") == [(1,)]
    assert ("postgres_destination.migrated",
            {"from_version": 0, "to_version": SCHEMA_VERSION}) in events.seen


NEWER = {**MIGRATIONS, SCHEMA_VERSION + 1: (
    "ALTER TABLE {schema}.rows ADD COLUMN note text",
    "CREATE INDEX rows_note ON {schema}.rows (note)")}


def test_a_push_never_migrates_an_existing_schema_and_migrate_does_keeping_every_row(
        pg, make):
    make().push(batch(1, 2))
    events = Events()
    upgraded = make(migrations=NEWER, emit=events)
    assert upgraded.push(batch(3)).content == 3, "the older schema is written as it is"
    assert version(pg) == SCHEMA_VERSION and "note" not in columns(pg, "rows")
    assert upgraded.migrate() == (SCHEMA_VERSION, SCHEMA_VERSION + 1)
    assert version(pg) == SCHEMA_VERSION + 1 and "note" in columns(pg, "rows")
    assert upgraded.migrate() == (SCHEMA_VERSION + 1, SCHEMA_VERSION + 1), "once only"
    assert upgraded.push(batch(4)).content == 4
    assert pg.held(ORIGIN) == [1, 2, 3, 4]
    assert events.seen.count(("postgres_destination.migrated", {
        "from_version": SCHEMA_VERSION, "to_version": SCHEMA_VERSION + 1})) == 1


def test_a_failed_migration_leaves_the_previous_version_whole(pg, make):
    make().push(batch(1))
    broken = {**MIGRATIONS, SCHEMA_VERSION + 1: (
        "ALTER TABLE {schema}.rows ADD COLUMN note text", "SELECT no_such_function()")}
    with pytest.raises(PostgresDestinationError) as raised:
        make(migrations=broken).migrate()
    assert raised.value.kind == "migration_failed"
    assert f"from version {SCHEMA_VERSION} to {SCHEMA_VERSION + 1} failed" in str(raised.value)
    assert f"stays at version {SCHEMA_VERSION}" in str(raised.value)
    assert version(pg) == SCHEMA_VERSION and "note" not in columns(pg, "rows")
    assert pg.held(ORIGIN) == [1]
    assert make().push(batch(2)).content == 2, "the old version still works"


def test_a_newer_additive_schema_is_written_by_an_older_writer(pg, make):
    make(migrations=NEWER).push(batch(1))
    assert version(pg) == SCHEMA_VERSION + 1
    older = make()
    assert older.published("main", ORIGIN).content == 1
    assert older.push(batch(2)).content == 2
    assert pg.held(ORIGIN) == [1, 2]


def test_a_schema_admitting_only_newer_writers_refuses_an_older_one_by_name(pg, make):
    make().push(batch(1))
    pg.query("UPDATE hostcore.schema_version SET version = 7, min_writer_version = 7")
    events = Events()
    older = make(emit=events)
    for attempt in (lambda: older.published("main", ORIGIN), lambda: older.push(batch(2))):
        with pytest.raises(PostgresDestinationError) as raised:
            attempt()
        assert raised.value.kind == "schema_newer"
        assert (f"schema is version 7 and admits writers of version 7 or newer; this "
                f"hostcore-postgres writes as version {SCHEMA_VERSION}") in str(raised.value)
    assert pg.held(ORIGIN) == [1]
    assert ("postgres_destination.failed", {"kind": "schema_newer"}) in events.seen


def test_a_migration_raising_min_writer_version_mid_run_stops_the_older_writer(pg, make):
    older = make()
    older.push(batch(1))
    strict = {**MIGRATIONS, SCHEMA_VERSION + 1: (
        "UPDATE {schema}.schema_version SET min_writer_version = "
        + str(SCHEMA_VERSION + 1),)}
    make(migrations=strict).migrate()
    with pytest.raises(PostgresDestinationError, match="admits writers of version"):
        older.push(batch(2))
    assert pg.held(ORIGIN) == [1]
    assert make(migrations=strict).push(batch(2)).content == 2


def test_hosts_starting_together_on_an_empty_database_create_it_once(pg, make):
    destinations = [make() for _ in range(8)]
    errors: list[BaseException] = []

    def push(index: int) -> None:
        try:
            destinations[index].push(batch(1, 2, origin=f"host-{index}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert pg.query("SELECT count(*) FROM hostcore.destination") == [(1,)]
    assert len({d.instance() for d in destinations}) == 1
    assert pg.query("SELECT count(*) FROM hostcore.rows") == [(16,)]


ALTERATIONS = {
    # (The usage views of version 3 read payload: PostgreSQL alters it only without them.)
    "a column's type": ("DROP VIEW hostcore.usage_daily, hostcore.usage_responses; "
                        "ALTER TABLE hostcore.rows ALTER COLUMN payload TYPE text",
                        "column payload is text, not json"),
    "a required column added": (
        "ALTER TABLE hostcore.rows ADD COLUMN approved boolean NOT NULL DEFAULT false; "
        "ALTER TABLE hostcore.rows ALTER COLUMN approved DROP DEFAULT",
        "has a column approved that is NOT NULL without a default"),
    "a table dropped": ("DROP TABLE hostcore.refs CASCADE", "table hostcore.refs is missing"),
    "the refs key dropped": ("ALTER TABLE hostcore.refs DROP CONSTRAINT refs_pkey",
                             "table hostcore.refs lacks its primary key"),
}


@pytest.mark.parametrize("case", sorted(ALTERATIONS))
def test_a_table_altered_by_hand_is_refused_by_name(pg, make, case):
    statement, expected = ALTERATIONS[case]
    make().push(batch(1))
    pg.query(statement)
    fresh = make()
    with pytest.raises(PostgresDestinationError) as raised:
        fresh.push(batch(2))
    assert raised.value.kind == "schema_altered"
    assert expected in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_lost_identity_row_is_refused(pg, make):
    make().push(batch(1))
    pg.query("DELETE FROM hostcore.destination")
    fresh = make()
    with pytest.raises(PostgresDestinationError, match="no identity row"):
        fresh.instance()
    with pytest.raises(PostgresDestinationError, match="lost its row"):
        fresh.push(batch(2))


def test_a_column_added_for_the_teams_own_use_is_tolerated(pg, make):
    make().push(batch(1))
    pg.query("ALTER TABLE hostcore.rows ADD COLUMN reviewed boolean")
    assert make().push(batch(2)).content == 2


def test_two_schemas_in_one_database_are_two_destinations(pg, make):
    first, second = make(schema="team_a"), make(schema="team_b")
    first.push(batch(1, 2))
    second.push(batch(1))
    assert first.instance() != second.instance()
    assert pg.held(ORIGIN, schema="team_a") == [1, 2]
    assert pg.held(ORIGIN, schema="team_b") == [1]
    assert first.key.endswith("#team_a") and second.key.endswith("#team_b")
