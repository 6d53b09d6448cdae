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

from hostcore.export.batch import ExportBatch, ExportRow
from hostcore.export.ref import Ref

DOC = Path(__file__).resolve().parents[3] / "docs" / "postgres.md"
PASSWORD = "machine-pw-1"
_roles = itertools.count()


def sql_block(first_line: str) -> str:
    """The ```sql block of docs/postgres.md whose first line is ``first_line``."""
    for block in re.findall(r"```sql\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL):
        lines = [line.strip() for line in block.splitlines()]
        if lines and lines[0] == first_line:
            return "\n".join(lines)
    raise AssertionError(f"docs/postgres.md has no sql block starting {first_line!r}")


def statements(block: str) -> list[str]:
    return [s.strip() for s in block.split(";") if s.strip()
            and not all(line.startswith("--") for line in s.strip().splitlines())]


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
