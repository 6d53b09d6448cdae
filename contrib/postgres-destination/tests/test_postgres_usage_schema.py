"""Schema version 3 (the usage views) on a real server: docs/postgres.md's printed
statements are what ``migrate`` creates; rows pushed under version 2 count once the
schema is migrated, each response once and a usage of the wrong shape not at all, as
the local store counts them; migrating again changes nothing; a reader of usage sees
counts and no payload.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from zoneinfo import ZoneInfo

import msgspec
import psycopg
import pytest
from hostcore_postgres.destination import PostgresDestination
from hostcore_postgres.schema import MIGRATIONS

from hostcore.evidence.prices import PRICES_FILE, load_prices
from hostcore.evidence.rows import EvidenceRow
from hostcore.evidence.usage import read_report
from hostcore.evidence.usage_fields import response_digest, tokens
from hostcore.export.batch import ExportBatch, ExportRow
from hostcore.host import Host

_databases = itertools.count()
KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")


def _docs() -> ModuleType:
    """How test_postgres_docs.py reads and splits the docs' SQL."""
    name = "postgres_docs_sql"
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("test_postgres_docs.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


DOCS = _docs()


def _views(pg, dsn: str) -> list[tuple[str, str]]:
    return pg.query("SELECT viewname::text, definition FROM pg_views "
                    "WHERE schemaname = 'hostcore' ORDER BY viewname", dsn=dsn)


def test_version_3_as_printed_on_version_2_is_the_schema_migrate_creates(pg):
    printed = pg.dsn
    for first in ("-- schema version 1", "-- schema version 2 (from version 1)"):
        with psycopg.connect(printed, autocommit=True) as conn:
            for statement in DOCS.statements(DOCS.sql_block(first)):
                conn.execute(statement)
    prices = "'" + PRICES_FILE.read_text("utf-8").replace("'", "''") + "'"
    with psycopg.connect(printed, autocommit=True) as conn:  # BEGIN … COMMIT, as printed
        for statement in DOCS.statements(DOCS.sql_block("-- schema version 3 (from version 2)")):
            conn.execute(statement.replace(":'prices'", prices))
    migrated = pg.server.create_database(f"t{os.getpid()}_v3_{next(_databases)}")
    for dsn in (printed, migrated):
        destination = PostgresDestination(dsn)
        try:
            assert destination.migrate()[1] == 3
            assert destination.push(DOCS.batch(1)).content == 1  # its tables checked
        finally:
            destination.close()
    assert _views(pg, printed) == _views(pg, migrated)
    assert {"usage_daily", "usage_responses"} <= {name for name, _ in _views(pg, printed)}
    table = "SELECT * FROM hostcore.prices ORDER BY model"
    assert pg.query(table, dsn=printed) == pg.query(table, dsn=migrated)
    shipped = json.loads(PRICES_FILE.read_text("utf-8"))
    assert len(pg.query(table, dsn=migrated)) == len(shipped["models"])


def _usage(model: str, counts: tuple[int, int, int, int], response: str) -> dict[str, object]:
    # As a row's payload is read back from the store: JSON, so plain values.
    return {"type": "assistant",
            "usage": msgspec.to_builtins(tokens(model, counts, response_digest(response)))}


# What the store holds: responses written on several rows, one past the long-context
# tier, a model priced only under its dated name's stem, an unpriced one, and usage of
# shapes hostcore's sources never write (another source's own, or damage), which
# neither the local aggregate nor the views may count.
DATED = "claude-sonnet-4-5-20250929"
ROWS = [
    ("s1", "2025-11-24T10:00:00.000Z", _usage(DATED, (10, 20, 30, 40), "a")),
    ("s1", "2025-11-24T10:00:00.000Z", _usage(DATED, (10, 20, 30, 40), "a")),
    ("s1", "2025-11-24T10:05:00.000Z", _usage("claude-sonnet-4-5", (5, 6, 7, 250_000), "b")),
    ("s2", "2025-11-24T23:59:59.999Z", _usage("anthropic/claude-opus-4-1", (1, 2, 3, 4), "c")),
    ("s2", "2025-11-25T00:00:00.000Z", _usage("local-model-x", (100, 1, 0, 0), "d")),
    ("s2", "2025-11-25T00:01:00.000Z", _usage("local-model-x", (100, 1, 0, 0), "d")),
    ("s2", "2025-11-25T00:02:00.000Z", {"usage": {"model": "m", "response": "e",
                                                  "input_tokens": "12", "output_tokens": 1,
                                                  "cache_creation_input_tokens": 0,
                                                  "cache_read_input_tokens": 0}}),
    ("s2", "2025-11-25T00:03:00.000Z", {"usage": {"model": "m", "response": "f",
                                                  "input_tokens": True, "output_tokens": 1,
                                                  "cache_creation_input_tokens": 0,
                                                  "cache_read_input_tokens": 0}}),
    ("s2", "2025-11-25T00:04:00.000Z", {"usage": {"model": "m", "response": "g",
                                                  "input_tokens": 1.5, "output_tokens": 1,
                                                  "cache_creation_input_tokens": 0,
                                                  "cache_read_input_tokens": 0}}),
    ("s2", "2025-11-25T00:05:00.000Z", {"usage": {"response": "h", "input_tokens": 1,
                                                  "output_tokens": 1,
                                                  "cache_creation_input_tokens": 0,
                                                  "cache_read_input_tokens": 0}}),
    ("s2", "2025-11-25T00:06:00.000Z", {"usage": {"model": "m", "response": "i",
                                                  "input_tokens": 1, "output_tokens": 1,
                                                  "cache_creation_input_tokens": 0,
                                                  "cache_read_input_tokens": 0,
                                                  "above_tier": [1, 2]}}),
    ("s2", "2025-11-25T00:07:00.000Z", {"usage": ["not", "an", "object"]}),
    ("s2", "2025-11-25T00:08:00.000Z", {"usage": None}),
]


def _local(root: Path) -> dict[tuple[str, str], tuple[object, ...]]:
    """The store's own report per UTC day and model (the view's days are UTC)."""
    with Host(root=root, load_entrypoints=False, env={}, config={}, read_only=True) as host:
        report = read_report(host.store.path, load_prices(), by="day", zone=ZoneInfo("UTC"))
    return {(entry.key, model): (*(getattr(t, k) for k in KINDS), t.cost_usd)
            for entry in report.entries for model, t in entry.models.items()}


def _fleet(pg) -> dict[tuple[str, str], tuple[object, ...]]:
    return {(day.isoformat(), model): (*figures[:4], figures[4])
            for day, model, *figures in pg.query(
                "SELECT day, model, input_tokens, output_tokens, cache_creation_input_tokens, "
                "cache_read_input_tokens, cost_usd FROM hostcore.usage_daily")}


def test_rows_pushed_under_version_2_count_after_the_migration_as_the_store_counts_them(
        pg, tmp_path):
    root = tmp_path / "root"
    pg.fill_root(root, rows=0)
    with Host(root=root, load_entrypoints=False, env={}, config={}) as host:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude-code",
                                      session_id=session, ts=ts, directory="/work/a",
                                      payload=payload) for session, ts, payload in ROWS)
    version_2 = {v: s for v, s in MIGRATIONS.items() if v <= 2}
    old_writer = PostgresDestination(pg.dsn, migrations=version_2)
    try:
        old_writer.migrate()
    finally:
        old_writer.close()
    (root / "hostcore.toml").write_text(
        f'[plugins.postgres-destination]\ndsn = "{pg.dsn}"\n'
        "[plugins.export]\nbackoff_seconds = 0.01\nbackoff_max_seconds = 0.01\n")
    done = pg.hostcore(root, "export", "-d", "postgres")
    assert done.returncode == 0, done.stderr
    assert pg.query("SELECT count(*) FROM hostcore.rows") == [(len(ROWS),)]

    owner = PostgresDestination(pg.dsn)
    try:
        assert owner.migrate() == (2, 3)
        before = pg.query("SELECT count(*) FROM hostcore.prices")
        assert owner.migrate() == (3, 3), "once only"
    finally:
        owner.close()
    assert pg.query("SELECT count(*) FROM hostcore.prices") == before

    local, fleet = _local(root), _fleet(pg)
    assert sorted(local) == sorted(fleet) == [
        ("2025-11-24", "anthropic/claude-opus-4-1"), ("2025-11-24", "claude-sonnet-4-5"),
        ("2025-11-24", "claude-sonnet-4-5-20250929"), ("2025-11-25", "local-model-x")]
    for key, figures in local.items():
        assert fleet[key][:4] == figures[:4], key
        if figures[4] is None:
            assert fleet[key][4] is None, key
        else:
            assert fleet[key][4] == pytest.approx(figures[4], rel=1e-12), key
    assert fleet[("2025-11-24", DATED)][:4] == (10, 20, 30, 40), "one response, two rows"
    assert fleet[("2025-11-25", "local-model-x")] == (100, 1, 0, 0, None)
    # The response past the tier costs more than the same tokens below it would.
    ((tiered, flat),) = pg.query(
        "SELECT u.cost_usd, (u.input_tokens * p.input + u.output_tokens * p.output "
        "+ u.cache_creation_input_tokens * p.cache_creation "
        "+ u.cache_read_input_tokens * p.cache_read) / p.per_tokens "
        "FROM hostcore.usage_responses u JOIN hostcore.prices p ON p.model = u.model "
        "WHERE u.cache_read_input_tokens = 250000")
    assert tiered > flat


def test_a_reader_of_usage_sees_the_counts_and_never_a_payload(pg):
    owner = PostgresDestination(pg.dsn)
    try:
        owner.migrate()
        owner.push(DOCS.batch(1, 2))
    finally:
        owner.close()
    reader = pg.role(f"usage_reader_{os.getpid()}_{next(_databases)}", "reader-pw-1",
                     "GRANT USAGE ON SCHEMA hostcore TO {role}",
                     "GRANT SELECT ON hostcore.exported, hostcore.usage_daily, "
                     "hostcore.usage_responses, hostcore.prices TO {role}")
    dsn = reader + " password=reader-pw-1"
    assert pg.query("SELECT count(*) FROM hostcore.usage_daily", dsn=dsn) == [(0,)]
    assert pg.query("SELECT count(*) FROM hostcore.usage_responses", dsn=dsn) == [(0,)]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        pg.query("SELECT payload FROM hostcore.rows", dsn=dsn)


def test_usage_views_over_rows_partitioned_by_month_survive_the_retention_job(pg):
    """fleet.md's partitioned rows, migrated to version 3: the views read across the
    partitions, and the monthly job still detaches and drops an old one."""
    for statement in DOCS.statements(DOCS.sql_block("-- schema version 1")):
        if statement.startswith("CREATE TABLE hostcore.rows"):
            for replacement in DOCS.statements(DOCS.sql_block("-- rows partitioned by month",
                                                              DOCS.FLEET)):
                pg.query(replacement)
        elif not statement.startswith("CREATE INDEX rows_pushed_at"):
            pg.query(statement)
    for job in DOCS.statements(DOCS.sql_block("-- monthly: create this month's and next "
                                              "month's partitions", DOCS.FLEET)):
        pg.query(job)
    pg.query("CREATE TABLE hostcore.rows_2020_01 PARTITION OF hostcore.rows "
             "FOR VALUES FROM ('2020-01-01') TO ('2020-02-01')")
    old = json.dumps(_usage(DATED, (1, 1, 1, 1), "old"))
    pg.query("INSERT INTO hostcore.rows VALUES ('main', 'old', 1, 'p', 's', 's', "
             "'2020-01-15T00:00:00.000000Z', '/w', '', %s, NULL, '2020-01-15')", (old,))
    owner = PostgresDestination(pg.dsn)
    try:
        assert owner.migrate() == (1, 3)
        rows = [ExportRow(n, "sessions", "claude-code", "s", ts, "/w", "",
                          msgspec.Raw(json.dumps(payload).encode()))
                for n, (_, ts, payload) in enumerate(ROWS[:3], start=1)]
        assert owner.push(ExportBatch(stream="main", origin="new", rows=rows)).content == 3
    finally:
        owner.close()
    # An origin nobody claimed (a row put in by hand under version 1) shows as itself.
    assert pg.query("SELECT machine::text, sum(output_tokens)::int FROM hostcore.usage_daily "
                    "GROUP BY machine ORDER BY machine") == [("old", 1), ("postgres", 26)]
    for job in DOCS.statements(DOCS.sql_block("-- monthly: drop the months past retention "
                                              "(13 months here)", DOCS.FLEET)):
        pg.query(job)
    assert pg.query("SELECT to_regclass('hostcore.rows_2020_01')") == [(None,)]
    assert pg.query("SELECT sum(output_tokens)::int FROM hostcore.usage_daily") == [(26,)]
