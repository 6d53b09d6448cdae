"""The destination against a real server: positions, governance, identity, the view."""

from __future__ import annotations

import json
import threading

import msgspec
import pytest
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.errors import PostgresDestinationError

from hostcore.export.batch import DestinationChanged, ExportBatch, ExportRow
from hostcore.export.ref import ABSENT, Conflict, Ref

ORIGIN = "0123abcd"


def row(position: int, payload: bytes | None = None) -> ExportRow:
    raw = payload if payload is not None else json.dumps({"n": position}).encode()
    return ExportRow(position, "sessions", "claude", "s1", "2024-05-01T10:00:00.000000Z",
                     "/work/a", "git@example:a.git", msgspec.Raw(raw), f"k{position}")


def batch(*positions: int, origin: str = ORIGIN, **fields: object) -> ExportBatch:
    return ExportBatch(stream="main", origin=origin, rows=[row(p) for p in positions],
                       **fields)  # type: ignore[arg-type]


@pytest.fixture
def destination(pg):
    destination = PostgresDestination(pg.dsn)
    yield destination
    destination.close()


def test_a_push_is_published_with_its_position_and_identities(destination, pg):
    assert destination.published("main", ORIGIN) == Ref()
    result = destination.push(batch(1, 2, 5, sets=Ref(context="c1")))
    assert result == Ref(content=5, context="c1")
    assert destination.published("main", ORIGIN) == result
    assert pg.held(ORIGIN) == [1, 2, 5]


def test_rows_at_or_below_the_position_are_dropped_so_a_rerun_duplicates_nothing(
        destination, pg):
    destination.push(batch(1, 2, 3))
    assert destination.push(batch(2, 3, 4, 5)).content == 5
    assert destination.push(batch(1, 2)).content == 5
    assert pg.held(ORIGIN) == [1, 2, 3, 4, 5]


def test_rows_out_of_order_are_refused_and_nothing_is_written(destination, pg):
    destination.push(batch(1))
    with pytest.raises(PostgresDestinationError, match="ascending position order"):
        destination.push(batch(2, 4, 3))
    assert pg.held(ORIGIN) == [1]
    assert destination.published("main", ORIGIN).content == 1


def test_the_payload_is_stored_byte_for_byte_even_what_jsonb_would_refuse(destination, pg):
    payload = b'{"z": 1, "a": "\\u0000 nul", "a2": [1,  2]}'
    destination.push(ExportBatch(stream="main", origin=ORIGIN, rows=[row(1, payload)]))
    ((stored, text, key),) = pg.query("SELECT payload::text, ts, key FROM hostcore.rows")
    assert stored.encode() == payload
    assert (text, key) == ("2024-05-01T10:00:00.000000Z", "k1")


def test_origins_are_separate_feeds_with_separate_governance(destination, pg):
    destination.push(batch(1, 2, 3, origin="host-a", sets=Ref(context="a1")))
    destination.push(batch(1, 2, origin="host-b", sets=Ref(context="b1")))
    assert destination.published("main", "host-a") == Ref(content=3, context="a1")
    assert destination.published("main", "host-b") == Ref(content=2, context="b1")
    # host-b moving its context asserts only its own value: host-a's never enters it.
    destination.push(batch(3, origin="host-b", sets=Ref(context="b2"),
                           expect=Ref(context="b1")))
    assert destination.published("main", "host-a").context == "a1"
    assert pg.held("host-a") == [1, 2, 3] and pg.held("host-b") == [1, 2, 3]


def test_a_stale_governance_expectation_is_a_conflict_that_writes_nothing(destination, pg):
    destination.push(batch(1, sets=Ref(context="c1", terms="t1")))
    with pytest.raises(Conflict) as raised:
        destination.push(batch(2, 3, sets=Ref(context="c3"), expect=Ref(context="c2")))
    assert raised.value.component == "context"
    assert destination.published("main", ORIGIN) == Ref(content=1, context="c1", terms="t1")
    assert pg.held(ORIGIN) == [1]


def test_content_alone_asserts_nothing_whatever_the_governance_held(destination):
    destination.push(batch(1, sets=Ref(context="c1")))
    assert destination.push(batch(2)) == Ref(content=2, context="c1")


def test_a_create_only_expectation_writes_once_and_then_conflicts(destination):
    first = destination.push(batch(1, sets=Ref(decisions="d1"), expect=Ref(decisions=ABSENT)))
    assert first.decisions == "d1"
    with pytest.raises(Conflict):
        destination.push(batch(2, sets=Ref(decisions="d2"), expect=Ref(decisions=ABSENT)))
    assert destination.published("main", ORIGIN).decisions == "d1"


def test_rewriting_the_value_already_held_is_not_a_conflict(destination):
    """A kill between the database's commit and the pusher's record of it: the rerun
    carries the same change and the same (now stale) expectation."""
    destination.push(batch(sets=Ref(context="c1")))
    destination.push(batch(1, sets=Ref(context="c2"), expect=Ref(context="c1")))
    rerun = destination.push(batch(1, sets=Ref(context="c2"), expect=Ref(context="c1")))
    assert rerun == Ref(content=1, context="c2")


def test_the_identity_row_is_created_with_the_schema_and_never_changes(destination, pg):
    assert destination.instance() == "", "no schema yet: no identity"
    destination.push(batch(1))
    instance = destination.instance()
    ((stored,),) = pg.query("SELECT instance FROM hostcore.destination")
    assert instance == stored and len(instance) == 32
    destination.push(batch(2))
    assert destination.instance() == instance


def test_a_replaced_database_is_noticed_by_its_identity(destination, pg):
    destination.push(batch(1, 2))
    instance = destination.instance()
    pg.query("DROP SCHEMA hostcore CASCADE")  # the database replaced by an empty one
    with pytest.raises(DestinationChanged):
        destination.push(batch(3, destination=instance, after=2))
    assert pg.query("SELECT count(*) FROM hostcore.rows") == [(0,)]
    assert destination.instance() not in ("", instance)


def test_a_restored_older_database_is_noticed_by_its_position(destination, pg):
    destination.push(batch(1, 2, 3))
    # A restore from a backup taken at position 1: same identity, older position. A
    # restore replaces the tables whole; no UPDATE may move a position back, so the
    # owner's guard is set aside for this one statement, as a restore sets it aside.
    pg.query("DELETE FROM hostcore.rows WHERE position > 1")
    pg.query("ALTER TABLE hostcore.refs DISABLE TRIGGER refs_guard; "
             "UPDATE hostcore.refs SET position = 1; "
             "ALTER TABLE hostcore.refs ENABLE TRIGGER refs_guard")
    with pytest.raises(DestinationChanged) as raised:
        destination.push(batch(4, destination=destination.instance(), after=3))
    assert (raised.value.after, raised.value.held) == (3, 1)
    assert pg.held(ORIGIN) == [1]


def test_a_push_from_the_position_held_passes_the_continuity_check(destination, pg):
    destination.push(batch(1))
    assert destination.push(batch(2, destination=destination.instance(), after=1)).content == 2


def test_the_exported_view_shows_what_left_which_machine_when(destination, pg):
    destination.push(batch(1, 2, origin="host-a"))
    destination.push(batch(3, origin="host-a"))
    destination.push(batch(1, origin="host-b"))
    lines = pg.query("SELECT machine, origin, rows, first_position, last_position, "
                     "pushed_at IS NOT NULL FROM hostcore.exported "
                     "ORDER BY origin, first_position")
    assert lines == [("postgres", "host-a", 2, 1, 2, True), ("postgres", "host-a", 1, 3, 3, True),
                     ("postgres", "host-b", 1, 1, 1, True)]


def test_pushes_of_one_origin_from_two_threads_hold_every_row_once(pg):
    """The refs row lock serialises two pushers of one origin (two connections)."""
    first, second = PostgresDestination(pg.dsn), PostgresDestination(pg.dsn)
    try:
        def push_all(destination):
            for start in range(1, 400, 20):
                destination.push(batch(*range(start, start + 20)))

        threads = [threading.Thread(target=push_all, args=(d,)) for d in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        first.close()
        second.close()
    assert pg.held(ORIGIN) == list(range(1, 401))


def test_a_push_with_no_rows_and_no_change_writes_nothing(destination, pg):
    destination.push(batch(1))
    (before,) = pg.query("SELECT pushed_at FROM hostcore.refs")
    assert destination.push(batch()) == Ref(content=1)
    assert pg.query("SELECT pushed_at FROM hostcore.refs") == [before]


@pytest.mark.parametrize("mode", ["disable", "require", "verify-full"])
def test_sslmode_reaches_the_connection_unchanged(pg, mode):
    destination = PostgresDestination(f"{pg.dsn} sslmode={mode}")
    try:
        destination.published("main", ORIGIN)
        assert destination._conn.info.get_parameters()["sslmode"] == mode
    finally:
        destination.close()


def test_the_cache_key_names_the_place_never_the_role_or_password():
    destination = PostgresDestination(
        "host=/run/db port=6432 dbname=fleet user=machine_042 password=hunter2", schema="team")
    assert destination.key == "postgres:/run/db:6432/fleet#team"
