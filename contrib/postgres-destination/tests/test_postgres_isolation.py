"""One machine's role, with exactly the grants docs/postgres.md prescribes and SQL of its
own, cannot touch another machine's rows, refs or attribution: the database refuses.

The victim is a real host exporting through real ``hostcore`` processes as its own
role; the attacker is a second machine role sending plain SQL. After every attack the
victim's rows, its status and the ``exported`` view are exactly what it pushed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from hostcore_postgres.destination import PostgresDestination

from hostcore.host import Host

if TYPE_CHECKING:
    from conftest import Machine

ORIGIN_TAKEN, GUARD_REFUSED = "HC001", "HC002"


@pytest.fixture
def fleet(pg, tmp_path):
    """The owner's migrated schema, a victim host that exported 40 rows as its own
    role, and an attacking machine role (which exported its own rows too)."""
    owner = PostgresDestination(pg.dsn)
    owner.migrate()
    owner.close()
    victim, attacker = pg.machine("victim"), pg.machine("attacker")
    config = {"plugins": {"postgres-destination": {"dsn_env": "PG_MACHINE_DSN"},
                          "export": pg.quick_retry}}
    victim_root, attacker_root = tmp_path / "victim", tmp_path / "attacker"
    origin = pg.fill_root(victim_root, config, rows=40)
    attacker_origin = pg.fill_root(attacker_root, config, rows=5)
    for root, who in ((victim_root, victim), (attacker_root, attacker)):
        result = pg.hostcore(root, "export", "-d", "postgres", PG_MACHINE_DSN=who.dsn)
        assert result.returncode == 0, result.stderr
    return Fleet(pg, victim, attacker, victim_root, origin, attacker_origin)


@dataclass
class Fleet:
    pg: object
    victim: Machine
    attacker: Machine
    root: Path
    origin: str
    attacker_origin: str

    def export(self) -> str:
        result = self.pg.hostcore(self.root, "export", "-d", "postgres", "--json",  # type: ignore[attr-defined]
                                  PG_MACHINE_DSN=self.victim.dsn)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def status(self) -> dict:
        result = self.pg.hostcore(self.root, "status", "--json",  # type: ignore[attr-defined]
                                  PG_MACHINE_DSN=self.victim.dsn)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["components"]["worker"]["export"]

    def assert_exact(self) -> None:
        """The victim's rows, status and attribution are exactly what it pushed."""
        with Host(root=self.root, load_entrypoints=False, env={}, read_only=True) as host:
            permitted = [p for (p,) in host.seam.read_rows_since_sync(None, 0, ())]
        pg = self.pg
        assert pg.held(self.origin) == permitted  # type: ignore[attr-defined]
        shown = self.status()
        assert (shown["position"], shown["rows_behind"]) == (permitted[-1], 0)
        assert set(shown["governance"].values()) == {"current"}
        lines = pg.query(  # type: ignore[attr-defined]
            "SELECT machine, sum(rows), min(first_position), max(last_position) "
            "FROM hostcore.exported WHERE origin = %s GROUP BY machine", (self.origin,))
        assert lines == [(self.victim.role, len(permitted), permitted[0], permitted[-1])]


def refused(machine: Machine, statement: str, params: tuple[object, ...] = ()) -> str:
    """The SQLSTATE with which the database refuses ``statement`` from ``machine``."""
    with pytest.raises(psycopg.Error) as raised:
        machine.sql(statement, params)
    return str(raised.value.sqlstate)


def test_a_machine_cannot_hide_another_machines_rows_by_moving_its_position(fleet):
    victim = fleet.origin
    # RLS: the victim's refs row is invisible and untouchable to the attacker.
    assert fleet.attacker.sql("SELECT origin FROM hostcore.refs") == [(fleet.attacker_origin,)]
    assert fleet.attacker.rowcount(
        "UPDATE hostcore.refs SET position = position + 500 WHERE origin = %s", (victim,)) == 0
    assert refused(fleet.attacker, "INSERT INTO hostcore.refs (stream, origin, position) "
                   "VALUES ('main', %s, 100000) ON CONFLICT (stream, origin) DO UPDATE "
                   "SET position = 100000", (victim,)) == ORIGIN_TAKEN
    fleet.pg.fill_root(fleet.root, rows=500)
    assert json.loads(fleet.export())["rows"] == 500
    fleet.assert_exact()


def test_a_machine_cannot_plant_rows_under_another_machines_origin(fleet):
    columns = ("stream, origin, position, partition, source_id, session_id, ts, directory, "
               "git_remote, payload")
    assert refused(fleet.attacker, f"INSERT INTO hostcore.rows ({columns}) VALUES "
                   "('main', %s, 1000, 'p', 's', 's', 't', '/forged', '', '{}')",
                   (fleet.origin,)) == ORIGIN_TAKEN
    with psycopg.connect(fleet.attacker.dsn, autocommit=True) as conn, pytest.raises(
            psycopg.Error) as raised, conn.cursor() as cursor, cursor.copy(
            f"COPY hostcore.rows ({columns}) FROM STDIN") as copy:
        for position in range(1001, 1011):
            copy.write_row(("main", fleet.origin, position, "p", "s", "s", "t", "/forged",
                            "", "{}"))
    assert raised.value.sqlstate == ORIGIN_TAKEN
    # Nor under an origin nobody claimed yet with a refs row of its own: the claim is
    # made by a refs insert, and the rows trigger checks the claim.
    assert refused(fleet.attacker, f"INSERT INTO hostcore.rows ({columns}) VALUES "
                   "('main', 'unclaimed', 1, 'p', 's', 's', 't', '/w', '', '{}')") == \
        ORIGIN_TAKEN
    assert fleet.pg.query("SELECT count(*) FROM hostcore.rows WHERE directory = '/forged'") \
        == [(0,)]
    fleet.pg.fill_root(fleet.root, rows=7)
    assert json.loads(fleet.export())["rows"] == 7, "the victim's export is not blocked"
    fleet.assert_exact()


def test_a_machine_cannot_reattribute_another_machines_rows_in_exported(fleet):
    victim = fleet.origin
    assert fleet.attacker.rowcount("UPDATE hostcore.refs SET pushed_by = current_user "
                                   "WHERE origin = %s", (victim,)) == 0
    assert refused(fleet.attacker, "UPDATE hostcore.pushes SET role = current_user") == "42501"
    assert refused(fleet.attacker, "INSERT INTO hostcore.pushes VALUES (current_user, 'main', "
                   "%s, 1, 40, 40, now())", (victim,)) == "42501"
    assert refused(fleet.attacker, "UPDATE hostcore.origins SET role = current_user") == "42501"
    assert refused(fleet.attacker, "DELETE FROM hostcore.origins") == "42501"
    assert refused(fleet.attacker, "SELECT hostcore.claim_origin(%s)", (victim,)) == "42501"
    # Its own refs row says the attacker pushed it, whatever the attacker writes there.
    fleet.attacker.sql("UPDATE hostcore.refs SET pushed_by = %s WHERE origin = %s",
                       (fleet.victim.role, fleet.attacker_origin))
    assert fleet.pg.query("SELECT pushed_by FROM hostcore.refs WHERE origin = %s",
                          (fleet.attacker_origin,)) == [(fleet.attacker.role,)]
    assert fleet.pg.query("SELECT DISTINCT machine FROM hostcore.exported WHERE origin = %s",
                          (fleet.attacker_origin,)) == [(fleet.attacker.role,)]
    fleet.assert_exact()


def test_a_machine_cannot_overwrite_another_machines_published_governance(fleet):
    victim = fleet.origin
    (before,) = fleet.pg.query("SELECT context, terms, decisions FROM hostcore.refs "
                               "WHERE origin = %s", (victim,))
    assert fleet.attacker.rowcount("UPDATE hostcore.refs SET context = 'forged', "
                                   "terms = 'forged' WHERE origin = %s", (victim,)) == 0
    assert refused(fleet.attacker, "INSERT INTO hostcore.refs (stream, origin, context) "
                   "VALUES ('main', %s, 'forged') ON CONFLICT (stream, origin) DO UPDATE "
                   "SET context = 'forged'", (victim,)) == ORIGIN_TAKEN
    assert fleet.pg.query("SELECT context, terms, decisions FROM hostcore.refs "
                          "WHERE origin = %s", (victim,)) == [before]
    fleet.assert_exact()


def test_a_position_moves_only_forward_even_for_its_own_role(fleet):
    assert refused(fleet.victim, "UPDATE hostcore.refs SET position = 1 WHERE origin = %s",
                   (fleet.origin,)) == GUARD_REFUSED
    assert refused(fleet.victim, "UPDATE hostcore.refs SET origin = 'elsewhere' "
                   "WHERE origin = %s", (fleet.origin,)) == GUARD_REFUSED
    fleet.assert_exact()


def test_a_disabled_guard_stops_the_push_as_an_altered_schema(fleet, pg):
    """The destination trusts only what the database enforces: a guard switched off
    by hand is refused by name, not written through."""
    pg.query("ALTER TABLE hostcore.rows DISABLE TRIGGER rows_guard")
    pg.fill_root(fleet.root, rows=2)
    result = pg.hostcore(fleet.root, "export", "-d", "postgres",
                         PG_MACHINE_DSN=fleet.victim.dsn)
    assert result.returncode == 1
    assert "trigger rows_guard dropped or disabled" in result.stderr
    pg.query("ALTER TABLE hostcore.rows ENABLE TRIGGER rows_guard")
    assert json.loads(fleet.export())["rows"] == 2
    fleet.assert_exact()
