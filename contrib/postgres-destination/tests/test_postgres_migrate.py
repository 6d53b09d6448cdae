"""``hostcore postgres migrate``, a version-1 schema as the previous release created it
migrated to version 2, and a rolling upgrade: hosts of two writer versions pushing
while the owner migrates, 0 rows lost, 0 duplicated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.schema import MIGRATIONS, SCHEMA_VERSION

from hostcore.evidence.prices import PRICES_FILE
from hostcore.export.exporter import Exporter
from hostcore.host import Host

WORKER = Path(__file__).with_name("fleet_worker.py")
VERSION_1 = {1: MIGRATIONS[1]}
ROLLING_HOSTS = 6
ROLLING_ROUNDS = 8
SHIPPED = json.loads(PRICES_FILE.read_text("utf-8"))
PRICES = "SELECT * FROM hostcore.prices ORDER BY model"


def version_1_schema(pg) -> None:
    """The schema exactly as the previous release (version 1 only) creates it."""
    owner = PostgresDestination(pg.dsn, migrations=VERSION_1)
    try:
        assert owner.migrate() == (0, 1)
    finally:
        owner.close()


def migrate(pg, root: Path, *args: str, dsn: str | None = None):
    config = {"plugins": {"postgres-destination": {"dsn_env": "PG_OWNER_DSN"}}}
    pg.fill_root(root, config, rows=0)
    return pg.hostcore(root, "postgres", "migrate", *args, PG_OWNER_DSN=dsn or pg.dsn)


def test_migrate_creates_the_schema_with_nothing_to_push_and_runs_again_harmlessly(
        pg, tmp_path):
    root = tmp_path / "owner"
    first = migrate(pg, root, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"schema": "hostcore", "found": 0,
                                        "version": SCHEMA_VERSION, "migrated": True,
                                        "prices_refreshed": len(SHIPPED["models"])}
    again = migrate(pg, root)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (f"the hostcore schema is at version {SCHEMA_VERSION}; "
                                    "nothing to migrate")
    assert pg.query("SELECT version, min_writer_version FROM hostcore.schema_version") == [
        (SCHEMA_VERSION, 1)]


def shipped_prices(pg) -> list[tuple[object, ...]]:
    """The shipped table as a fresh database's ``prices`` holds it."""
    fresh = pg.server.create_database(f"t{os.getpid()}_fresh_prices")
    owner = PostgresDestination(fresh)
    try:
        owner.migrate()
    finally:
        owner.close()
    return pg.query(PRICES, dsn=fresh)


def test_migrate_at_version_3_brings_an_older_price_table_to_the_shipped_one(pg, tmp_path):
    """A database a previous release took to version 3: its table is older than the
    one this package ships (a price since changed, a model since added). migrate
    upserts the shipped table, keeps what the owner put there dated later and the
    models no longer shipped, and a second run changes nothing."""
    root = tmp_path / "owner"
    assert migrate(pg, root).returncode == 0
    changed, added = sorted(SHIPPED["models"])[:2]
    override = sorted(SHIPPED["models"])[2]
    pg.query("UPDATE hostcore.prices SET input = input * 10, as_of = '2000-01-01' "
             "WHERE model = %s", (changed,))
    pg.query("DELETE FROM hostcore.prices WHERE model = %s", (added,))
    pg.query("UPDATE hostcore.prices SET output = 123, as_of = '2999-01-01' "
             "WHERE model = %s", (override,))
    pg.query("INSERT INTO hostcore.prices SELECT 'retired-model', input, output, "
             "cache_creation, cache_read, above_input, above_output, above_cache_creation, "
             "above_cache_read, per_tokens, '2000-01-01' FROM hostcore.prices "
             "WHERE model = %s", (override,))
    kept = pg.query("SELECT * FROM hostcore.prices WHERE model IN (%s, 'retired-model') "
                    "ORDER BY model", (override,))

    done = migrate(pg, root, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"schema": "hostcore", "found": SCHEMA_VERSION,
                                       "version": SCHEMA_VERSION, "migrated": False,
                                       "prices_refreshed": 2}
    shipped = {row[0]: row for row in shipped_prices(pg)}
    held = {row[0]: row for row in pg.query(PRICES)}
    assert held[changed] == shipped[changed] and held[added] == shipped[added]
    assert sorted(held[m] for m in (override, "retired-model")) == kept
    assert {m: r for m, r in held.items() if m not in (override, "retired-model")} == {
        m: r for m, r in shipped.items() if m != override}

    again = migrate(pg, root)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (f"the hostcore schema is at version {SCHEMA_VERSION}; "
                                    "nothing to migrate")
    assert {row[0]: row for row in pg.query(PRICES)} == held


def test_a_price_refresh_that_fails_changes_no_price(pg, tmp_path):
    """The refresh is one statement in the migration's transaction: a price the
    database refuses (here a trigger of the owner's, on the second model) leaves
    the first one as it was too."""
    root = tmp_path / "owner"
    assert migrate(pg, root).returncode == 0
    first, second = sorted(SHIPPED["models"])[:2]
    pg.query("UPDATE hostcore.prices SET input = 0, as_of = '2000-01-01' "
             "WHERE model IN (%s, %s)", (first, second))
    before = pg.query(PRICES)
    pg.query("CREATE FUNCTION hostcore.refuse() RETURNS trigger LANGUAGE plpgsql AS "
             "$$ BEGIN RAISE EXCEPTION 'refused by the owner'; END $$")
    pg.query(f"CREATE TRIGGER refuse BEFORE UPDATE ON hostcore.prices FOR EACH ROW "
             f"WHEN (old.model = '{second}') EXECUTE FUNCTION hostcore.refuse()")

    failed = migrate(pg, root)
    assert failed.returncode == 1
    assert "refused by the owner" in failed.stderr and "rolled back" in failed.stderr
    assert pg.query(PRICES) == before


def test_migrate_from_version_1_with_nothing_to_push(pg, tmp_path):
    version_1_schema(pg)
    result = migrate(pg, tmp_path / "owner")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"migrated the hostcore schema from version 1 to " \
                                    f"{SCHEMA_VERSION}"


def test_migrate_as_a_machine_role_is_one_line_naming_who_must_run_it(pg, tmp_path):
    version_1_schema(pg)
    role = pg.machine("early")
    result = migrate(pg, tmp_path / "machine", dsn=role.dsn)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert f"is at version 1, older than {SCHEMA_VERSION}, and this role may not migrate " \
           "it; run `hostcore postgres migrate` as the database owner" in lines[0]
    assert pg.query("SELECT version FROM hostcore.schema_version") == [(1,)]


def test_a_version_1_schema_migrates_keeping_rows_and_attribution_then_isolates(
        pg, tmp_path):
    version_1_schema(pg)
    config = {"plugins": {"postgres-destination": {"dsn_env": "PG_MACHINE_DSN"},
                          "export": pg.quick_retry}}
    machines = [pg.machine("old"), pg.machine("old")]
    roots = [tmp_path / f"host-{n}" for n in range(2)]
    origins = [pg.fill_root(root, config, rows=12) for root in roots]
    for root, role in zip(roots, machines, strict=True):
        with _host(root) as host:
            old = PostgresDestination(role.dsn, migrations=VERSION_1)
            Exporter(host, old, batch_rows=5).run()
            old.close()
    before = pg.query("SELECT machine, origin, rows, first_position, last_position "
                      "FROM hostcore.exported ORDER BY origin, first_position")

    assert migrate(pg, tmp_path / "owner").returncode == 0
    assert pg.query("SELECT version FROM hostcore.schema_version") == [(SCHEMA_VERSION,)]
    assert sorted(pg.query("SELECT origin, role FROM hostcore.origins")) == sorted(
        zip(origins, (m.role for m in machines), strict=True))
    assert pg.query("SELECT machine, origin, rows, first_position, last_position "
                    "FROM hostcore.exported ORDER BY origin, first_position") == before
    # Each machine pushes on with the new package, and is now held to its own origin.
    for root, role, origin in zip(roots, machines, origins, strict=True):
        pg.fill_root(root, rows=3)
        result = pg.hostcore(root, "export", "-d", "postgres", PG_MACHINE_DSN=role.dsn)
        assert result.returncode == 0, result.stderr
        assert pg.held(origin) == list(range(1, 16))
    with psycopg.connect(machines[0].dsn, autocommit=True) as conn, pytest.raises(
            psycopg.Error) as raised:
        conn.execute("INSERT INTO hostcore.refs (stream, origin, position) VALUES "
                     "('main', %s, 99) ON CONFLICT (stream, origin) DO UPDATE SET "
                     "position = 99", (origins[1],))
    assert raised.value.sqlstate == "HC001"


def test_an_origin_a_version_1_writer_took_over_shows_in_status_and_stops_the_export(
        pg, tmp_path):
    """Version 1 let any machine rewrite another's refs row (pushed_by among it). The
    migration binds each origin to its last pusher, the only evidence version 1
    kept; a victim whose origin went to another role is told so by status and by its
    export, instead of trusting a row someone else controls."""
    version_1_schema(pg)
    config = {"plugins": {"postgres-destination": {"dsn_env": "PG_MACHINE_DSN"},
                          "export": pg.quick_retry}}
    victim, attacker = pg.machine("victim"), pg.machine("attacker")
    root = tmp_path / "victim"
    origin = pg.fill_root(root, config, rows=4)
    with _host(root) as host:
        old = PostgresDestination(victim.dsn, migrations=VERSION_1)
        Exporter(host, old).run()
        old.close()
    with psycopg.connect(attacker.dsn, autocommit=True) as conn:
        conn.execute("UPDATE hostcore.refs SET pushed_by = current_user, pushed_at = now() "
                     "WHERE origin = %s", (origin,))
    assert migrate(pg, tmp_path / "owner").returncode == 0

    shown = pg.hostcore(root, "status", "--json", PG_MACHINE_DSN=victim.dsn)
    export = json.loads(shown.stdout)["components"]["worker"]["export"]
    assert f"holds this store's origin {origin} for role {attacker.role}, not for " \
           f"{victim.role}" in export["error"]
    pg.fill_root(root, rows=2)
    failed = pg.hostcore(root, "export", "-d", "postgres", PG_MACHINE_DSN=victim.dsn)
    assert failed.returncode == 1
    assert "origin" in failed.stderr and attacker.role in failed.stderr
    # The owner rebinds it (docs/postgres.md); the victim resumes where it was.
    pg.query("UPDATE hostcore.origins SET role = %s WHERE origin = %s", (victim.role, origin))
    resumed = pg.hostcore(root, "export", "-d", "postgres", PG_MACHINE_DSN=victim.dsn)
    assert resumed.returncode == 0, resumed.stderr
    assert pg.held(origin) == [1, 2, 3, 4, 5, 6]


def test_a_rolling_upgrade_hosts_of_both_writer_versions_push_across_the_migration(
        pg, tmp_path):
    """Six hosts, each its own role and process: three still on a package that knows
    schema version 1 only, three on this one. The owner migrates to version 2 while
    they push. Every host holds every permitted row once; nobody was refused."""
    version_1_schema(pg)
    go = tmp_path / "go"
    roles = [pg.machine("rolling") for _ in range(ROLLING_HOSTS)]
    roots = [tmp_path / f"host-{n}" for n in range(ROLLING_HOSTS)]
    writers = [1 if n % 2 else SCHEMA_VERSION for n in range(ROLLING_HOSTS)]
    procs = [subprocess.Popen(
        [sys.executable, str(WORKER), "rolling", str(root), role.dsn, str(ROLLING_ROUNDS),
         str(go), str(writer)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PG")})
        for root, role, writer in zip(roots, roles, writers, strict=True)]
    for proc in procs:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": True}
    go.touch()
    deadline = time.monotonic() + 120
    while pg.query("SELECT count(DISTINCT origin) FROM hostcore.rows") < [(3,)]:
        assert time.monotonic() < deadline, "the hosts never pushed"
        time.sleep(0.05)
    owner = PostgresDestination(pg.dsn)
    try:
        assert owner.migrate() == (1, SCHEMA_VERSION)
    finally:
        owner.close()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))

    ((migrated_at,),) = pg.query("SELECT migrated_at FROM hostcore.schema_version")
    for root, role, report in zip(roots, roles, reports, strict=True):
        with _host(root) as host:
            permitted = [p for (p,) in host.seam.read_rows_since_sync(None, 0, ())]
        assert pg.held(report["origin"]) == permitted, "0 lost, 0 duplicated"
        assert report["conflicts"] == 0
        assert pg.query("SELECT role FROM hostcore.origins WHERE origin = %s",
                        (report["origin"],)) == [(role.role,)]
        assert pg.query("SELECT machine, sum(rows) FROM hostcore.exported WHERE origin = %s "
                        "GROUP BY machine", (report["origin"],)) == [(role.role, len(permitted))]
    (before, after), = pg.query(
        "SELECT count(*) FILTER (WHERE pushed_at < %s), count(*) FILTER (WHERE pushed_at > %s) "
        "FROM hostcore.rows", (migrated_at, migrated_at))
    assert before > 0 and after > 0, "the migration landed while the hosts pushed"
    assert pg.query("SELECT version FROM hostcore.schema_version") == [(SCHEMA_VERSION,)]


def _host(root: Path) -> Host:
    return Host(root=root, load_entrypoints=False, env={}, config={})
