"""docs/postgres.md's SQL is what the destination does: run as printed, on a real server."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec
import psycopg
import pytest
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.errors import PostgresDestinationError
from hostcore_postgres.schema import lock_key

from hostcore.export.batch import ExportBatch, ExportRow
from hostcore.export.ref import Ref

DOCS = Path(__file__).resolve().parents[3] / "docs"
DOC, FLEET = DOCS / "postgres.md", DOCS / "fleet.md"
PASSWORD = "machine-pw-1"
_roles = itertools.count()


def sql_block(first_line: str, doc: Path = DOC) -> str:
    """The ```sql block of ``doc`` whose first line is ``first_line``."""
    for block in re.findall(r"```sql\n(.*?)```", doc.read_text("utf-8"), re.DOTALL):
        lines = [line.strip() for line in block.splitlines()]
        if lines and lines[0] == first_line:
            return "\n".join(block.splitlines())
    raise AssertionError(f"{doc.name} has no sql block starting {first_line!r}")


def statements(block: str) -> list[str]:
    """The block's statements: split at each ``;`` ending a line, except inside ``$$``."""
    found, current = [], []
    for line in block.splitlines():
        if not current and (not line.strip() or line.strip().startswith("--")):
            continue
        current.append(line)
        text = "\n".join(current)
        if line.rstrip().endswith(";") and text.count("$$") % 2 == 0:
            found.append(text.strip().rstrip(";"))
            current = []
    assert not current, f"an unterminated statement: {current}"
    return found


def batch(*positions: int, origin: str = "doc-origin", **fields: object) -> ExportBatch:
    return ExportBatch(stream="main", origin=origin, rows=[
        ExportRow(p, "sessions", "claude", f"s{p % 2}", "2024-05-01T10:00:00.000000Z", "/w",
                  "", msgspec.Raw(b'{"n": %d}' % p)) for p in positions], **fields)


def database(pg) -> str:
    return pg.dsn.split("dbname=")[1].split()[0]


def test_the_schema_as_printed_is_the_schema_the_destination_accepts(pg):
    for statement in statements(sql_block("-- schema version 1")):
        pg.query(statement)
    destination = PostgresDestination(pg.dsn)
    try:
        assert len(destination.instance()) == 32
        assert destination.push(batch(1, 2, sets=Ref(context="c"))) == Ref(content=2,
                                                                           context="c")
    finally:
        destination.close()
    assert pg.query("SELECT version FROM hostcore.schema_version") == [(1,)]


def test_version_2_as_printed_on_version_1_is_the_schema_migrate_creates(pg):
    for statement in statements(sql_block("-- schema version 1")):
        pg.query(statement)
    printed = statements(sql_block("-- schema version 2 (from version 1)"))
    # The printed advisory lock is the one migrate and every push take.
    (lock,) = [s for s in printed if "pg_advisory_xact_lock" in s]
    assert pg.query(lock.replace("SELECT pg_advisory_xact_lock(", "SELECT (", 1)) == [
        (lock_key("hostcore"),)]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # BEGIN … COMMIT, as printed
        for statement in printed:
            conn.execute(statement)
    destination = PostgresDestination(pg.dsn)
    try:
        assert destination.migrate() == (2, 3), "only version 3 (usage) left to migrate"
        assert destination.push(batch(1, 2)).content == 2  # its tables and guards checked
    finally:
        destination.close()
    assert pg.query("SELECT machine, rows FROM hostcore.exported") == [("postgres", 2)]
    assert pg.query("SELECT role FROM hostcore.origins WHERE origin = 'doc-origin'") == [
        ("postgres",)]


@pytest.fixture
def machine(pg):
    """The schema created by the owner's first push, and the doc's minimal role."""
    owner = PostgresDestination(pg.dsn)
    owner.push(batch(origin="owner"))
    owner.close()
    block = sql_block("-- minimal role for one machine")
    # Roles belong to the whole server: each test's machine gets a name of its own.
    role = f"machine_042_{next(_roles)}"
    block = block.replace("DATABASE fleet", f"DATABASE {database(pg)}")
    block = block.replace("'change me'", f"'{PASSWORD}'").replace("machine_042", role)
    for statement in statements(block):
        pg.query(statement)
    dsn = pg.dsn.replace("user=postgres", f"user={role}") + f" password={PASSWORD}"
    destination = PostgresDestination(dsn)
    yield Machine(destination, dsn, role)
    destination.close()


@dataclass
class Machine:
    destination: PostgresDestination
    dsn: str
    role: str


def test_the_minimal_role_can_push_and_publish(pg, machine):
    destination = machine.destination
    assert destination.published("main", "doc-origin") == Ref()
    assert destination.push(batch(1, 2, 3, sets=Ref(terms="t1"))).content == 3
    assert destination.push(batch(4, sets=Ref(terms="t2"), expect=Ref(terms="t1"))).content == 4
    assert destination.published("main", "doc-origin") == Ref(content=4, terms="t2")
    assert pg.held("doc-origin") == [1, 2, 3, 4]


@pytest.mark.parametrize("statement", [
    "SELECT * FROM hostcore.rows",
    "DELETE FROM hostcore.rows",
    "UPDATE hostcore.rows SET key = 'x'",
    "DELETE FROM hostcore.refs",
    "TRUNCATE hostcore.refs",
    "DROP TABLE hostcore.rows",
    "ALTER TABLE hostcore.refs ADD COLUMN x text",
    "CREATE TABLE hostcore.mine (x int)",
    "UPDATE hostcore.schema_version SET version = 2",
])
def test_the_minimal_role_can_do_nothing_else(pg, machine, statement):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        pg.query(statement, dsn=machine.dsn)


def test_a_missing_grant_is_one_line_naming_the_table(pg, machine):
    pg.query(f"REVOKE INSERT ON hostcore.rows FROM {machine.role}")
    with pytest.raises(PostgresDestinationError) as raised:
        machine.destination.push(batch(1))
    assert raised.value.kind == "permission"
    assert "permission denied for table rows" in str(raised.value)
    assert pg.query("SELECT count(*) FROM hostcore.rows") == [(0,)]


def test_the_example_queries_answer_what_left_which_machine_when(pg, machine):
    destination = machine.destination
    destination.push(batch(1, 2, sets=Ref(context="c-machine")))
    destination.push(batch(3))
    destination.push(batch(origin="doc-origin-2", sets=Ref(context="c-machine")))
    queries = statements(sql_block("-- what each machine sent in the last day, push by push"))
    assert len(queries) == 4
    by_push, per_day, sessions, odd = (pg.query(q.replace("machine_042", machine.role))
                                       for q in queries)
    assert [(m, o, n, a, b) for m, o, _, n, a, b in by_push] == [
        (machine.role, "doc-origin", 1, 3, 3), (machine.role, "doc-origin", 2, 1, 2)]
    assert [(m, n) for m, _, n in per_day] == [(machine.role, 3)]
    assert sorted((s, n) for s, _, n, _ in sessions) == [("s0", 1), ("s1", 2)]
    assert odd == [("postgres", "owner", "")], "the owner's store published no context"


def test_rows_partitioned_by_month_as_fleet_md_prints_them_take_pushes_and_retention(pg):
    """The schema of postgres.md with fleet.md's partitioned rows table, the monthly job
    that creates partitions, pushes through the destination, then the retention job."""
    partitioned = statements(sql_block("-- rows partitioned by month", FLEET))
    for statement in statements(sql_block("-- schema version 1")):
        if statement.startswith("CREATE TABLE hostcore.rows"):
            for replacement in partitioned:
                pg.query(replacement)
        elif not statement.startswith("CREATE INDEX rows_pushed_at"):
            pg.query(statement)
    for job in statements(sql_block("-- monthly: create this month's and next month's "
                                    "partitions", FLEET)):
        pg.query(job)
    pg.query("CREATE TABLE hostcore.rows_2020_01 PARTITION OF hostcore.rows "
             "FOR VALUES FROM ('2020-01-01') TO ('2020-02-01')")
    pg.query("INSERT INTO hostcore.rows VALUES ('main', 'old', 1, 'p', 's', 's', 't', '/w', "
             "'', '{}', NULL, '2020-01-15')")
    destination = PostgresDestination(pg.dsn)
    try:
        assert destination.push(batch(1, 2, 3)).content == 3
        assert destination.push(batch(2, 3, 4)).content == 4
    finally:
        destination.close()
    assert pg.held("doc-origin") == [1, 2, 3, 4]
    ((partition,),) = pg.query("SELECT DISTINCT tableoid::regclass::text FROM hostcore.rows "
                               "WHERE origin = 'doc-origin'")
    assert partition.startswith("hostcore.rows_2")

    for job in statements(sql_block("-- monthly: drop the months past retention "
                                    "(13 months here)", FLEET)):
        pg.query(job)
    assert pg.query("SELECT count(*) FROM hostcore.rows WHERE origin = 'old'") == [(0,)]
    assert pg.query("SELECT to_regclass('hostcore.rows_2020_01')") == [(None,)]
    assert pg.held("doc-origin") == [1, 2, 3, 4]


def test_rows_partitioned_by_month_take_the_version_2_guards_through_migrate(pg):
    """fleet.md's partitioned rows under version 1, then `migrate`: the statement
    trigger on the partitioned table checks and audits what lands in its partitions."""
    for statement in statements(sql_block("-- schema version 1")):
        if statement.startswith("CREATE TABLE hostcore.rows"):
            for replacement in statements(sql_block("-- rows partitioned by month", FLEET)):
                pg.query(replacement)
        elif not statement.startswith("CREATE INDEX rows_pushed_at"):
            pg.query(statement)
    for job in statements(sql_block("-- monthly: create this month's and next month's "
                                    "partitions", FLEET)):
        pg.query(job)
    owner = PostgresDestination(pg.dsn)
    try:
        assert owner.migrate() == (1, 3)
        assert owner.push(batch(1, 2, 3)).content == 3
    finally:
        owner.close()
    assert pg.query("SELECT machine, rows FROM hostcore.exported") == [("postgres", 3)]
    intruder = pg.machine("intruder")
    with pytest.raises(psycopg.Error) as raised:
        intruder.sql("INSERT INTO hostcore.rows (stream, origin, position, partition, "
                     "source_id, session_id, ts, directory, git_remote, payload) VALUES "
                     "('main', 'doc-origin', 9, 'p', 's', 's', 't', '/w', '', '{}')")
    assert raised.value.sqlstate == "HC001"
    assert pg.held("doc-origin") == [1, 2, 3]


def test_a_push_with_no_partition_for_its_month_is_one_line_and_writes_nothing(pg):
    for statement in statements(sql_block("-- schema version 1")):
        if statement.startswith("CREATE TABLE hostcore.rows"):
            for replacement in statements(sql_block("-- rows partitioned by month", FLEET)):
                pg.query(replacement)
        elif not statement.startswith("CREATE INDEX rows_pushed_at"):
            pg.query(statement)
    destination = PostgresDestination(pg.dsn)
    try:
        with pytest.raises(PostgresDestinationError) as raised:
            destination.push(batch(1))
        assert raised.value.kind == "refused"
        assert "no partition of relation" in str(raised.value)
        assert destination.published("main", "doc-origin").content == 0
    finally:
        destination.close()
