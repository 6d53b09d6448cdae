"""Usage across machines: three hosts (three roots, three roles, real Claude Code
transcripts, real ``hostcore`` processes) export into one real PostgreSQL, one of them
pushes everything again, and ``hostcore.usage_daily`` equals the sum of their local
``hostcore usage --exportable`` reports; docs/fleet.md's team queries, run as printed,
give the same figures; a local-only directory's usage never reaches the database.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from hostcore_postgres.destination import PostgresDestination

from hostcore.export.batch import EXPORT_COLUMNS, ExportBatch, ExportRow
from hostcore.host import Host

if TYPE_CHECKING:
    from conftest import Machine

REPO = Path(__file__).resolve().parents[3]
KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
         "cache_read_input_tokens")
PLUGINS = "claude-code,postgres-destination"
# (the host's role, whose it is in fleet.md's team.machines, the doc's name for it)
HOSTS = (("laptop", "alice", "alice_laptop"), ("desktop", "alice", "alice_desktop"),
         ("ci", "bob", "bob_laptop"))
SHARED = "/work/shared-project"
SECRET = "/work/secret-project"


def _module(path: Path, name: str) -> ModuleType:
    """A test module of this repository by its path (tests import no test package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# contrib/claude-code's generator of transcripts in the real format.
TRANSCRIPTS = _module(REPO / "contrib" / "claude-code" / "tests" / "test_claude_code_usage.py",
                      "claude_code_usage_transcripts")
# How docs' SQL is read and split (test_postgres_docs.py).
DOCS = _module(Path(__file__).with_name("test_postgres_docs.py"), "postgres_docs_sql")


@dataclass
class FleetHost:
    name: str
    person: str
    doc_name: str
    root: Path
    home: Path
    machine: Machine
    origin: str = ""


@dataclass
class Fleet:
    hosts: list[FleetHost]

    def local(self, pg, *args: str) -> list[dict[str, Any]]:
        """Each host's ``hostcore usage --json --exportable ARGS``, in host order."""
        return [_usage(pg, host, "--exportable", *args) for host in self.hosts]


def _run(pg, host: FleetHost, *args: str) -> str:
    done = pg.hostcore(host.root, *args, HOSTCORE_LOAD_PLUGINS=PLUGINS, HOME=str(host.home),
                       TZ="UTC")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _usage(pg, host: FleetHost, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_run(pg, host, "usage", "--json", *args))
    return found


@pytest.fixture
def fleet(pg, tmp_path: Path) -> Fleet:
    """Three hosts with a project in common, one with a local-only project, exported."""
    owner = PostgresDestination(pg.dsn)
    try:
        assert owner.migrate() == (0, 3), "the owner creates the schema, as fleet.md says"
    finally:
        owner.close()
    hosts = []
    for seed, (name, person, doc_name) in enumerate(HOSTS, start=1):
        home = tmp_path / name / "home"
        projects = {"-work-shared-project": SHARED, f"-work-{name}": f"/work/{name}-only"}
        if name == "laptop":
            projects["-work-secret-project"] = SECRET
        TRANSCRIPTS.write_home(home, projects, seed=seed)
        host = FleetHost(name, person, doc_name, tmp_path / name / "root", home,
                     pg.machine(name))
        config = pg.config(dsn=host.machine.dsn)
        config["plugins"]["claude-code"] = {"home": str(home)}
        host.origin = pg.fill_root(host.root, config, rows=0)  # an empty store, its config
        if name == "laptop":  # before anything is read, so nothing of it ever left
            _run(pg, host, "policy", "local-only", SECRET, "--force")
        _run(pg, host, "run", "--once")
        _run(pg, host, "export", "-d", "postgres")
        hosts.append(host)
    return Fleet(hosts)


def _repush(pg, host: FleetHost) -> int:
    """Push every permitted row of ``host`` again, as a host that lost its record of
    its pushes would; returns the position the database holds afterwards."""
    ((stream,),) = pg.query("SELECT DISTINCT stream FROM hostcore.rows WHERE origin = %s",
                            (host.origin,))
    with Host(root=host.root, load_entrypoints=False, env={}, config={},
              read_only=True) as opened:
        rows = [ExportRow(position, *columns[:6],
                          msgspec.Raw(payload if isinstance(payload, bytes)
                                      else payload.encode()), key)
                for position, *columns, payload, key
                in opened.seam.read_rows_since_sync(None, 0, EXPORT_COLUMNS)]
    destination = PostgresDestination(host.machine.dsn)
    try:
        return destination.push(ExportBatch(stream=stream, origin=host.origin,
                                            rows=rows)).content
    finally:
        destination.close()


def _figures(row: dict[str, Any] | tuple[Any, ...]) -> tuple[Any, ...]:
    if isinstance(row, dict):
        return (*(row[k] for k in KINDS), row["cost_usd"])
    return (*(int(n) for n in row[:4]), None if row[4] is None else float(row[4]))


def _add(into: dict[Any, list[Any]], key: Any, figures: tuple[Any, ...]) -> None:
    held = into.setdefault(key, [0, 0, 0, 0, None])
    for n in range(4):
        held[n] += figures[n]
    if figures[4] is not None:
        held[4] = (held[4] or 0.0) + figures[4]


def _same(ours: dict[Any, list[Any]], theirs: dict[Any, list[Any]]) -> None:
    """Equal token counts everywhere; costs equal to float rounding, None for None."""
    assert sorted(ours) == sorted(theirs)
    for key in ours:
        assert ours[key][:4] == theirs[key][:4], key
        if ours[key][4] is None:
            assert theirs[key][4] is None, key
        else:
            assert theirs[key][4] == pytest.approx(ours[key][4], rel=1e-9), key


def _per_day_and_model(reports: list[dict[str, Any]]) -> dict[Any, list[Any]]:
    summed: dict[Any, list[Any]] = {}
    for report in reports:
        for entry in report["entries"]:
            for model, figures in entry["models"].items():
                _add(summed, (entry["key"], model), _figures(figures))
    return summed


def _daily(pg, where: str = "", params: tuple[Any, ...] = ()) -> dict[Any, list[Any]]:
    found: dict[Any, list[Any]] = {}
    for day, model, *figures in pg.query(
            "SELECT day::text, model, input_tokens, output_tokens, "
            "cache_creation_input_tokens, cache_read_input_tokens, cost_usd "
            f"FROM hostcore.usage_daily {where}", params):
        _add(found, (day, model), _figures(tuple(figures)))
    return found


def test_usage_daily_equals_the_sum_of_the_hosts_local_reports_after_a_repush(pg, fleet):
    before = pg.query("SELECT count(*) FROM hostcore.rows")
    assert _repush(pg, fleet.hosts[1]) == pg.held(fleet.hosts[1].origin)[-1]
    assert pg.query("SELECT count(*) FROM hostcore.rows") == before, "the re-push added none"
    _run(pg, fleet.hosts[2], "export", "-d", "postgres")  # and a run with nothing new

    local = fleet.local(pg, "--by", "day", "--tz", "UTC")
    _same(_per_day_and_model(local), _daily(pg))
    for host, report in zip(fleet.hosts, local, strict=True):
        _same(_per_day_and_model([report]),
              _daily(pg, "WHERE machine = %s", (host.machine.role,)))
    assert len({day for day, _ in _daily(pg)}) >= 3
    # One response is on several rows: a sum over the rows themselves counts more.
    ((naive,),) = pg.query("SELECT sum((payload -> 'usage' ->> 'output_tokens')::bigint) "
                           "FROM hostcore.rows WHERE payload -> 'usage' IS NOT NULL")
    assert naive > sum(r["totals"]["output_tokens"] for r in local)
    # A model neither table prices: its tokens, no cost, in both places.
    ((unpriced,),) = pg.query("SELECT bool_and(cost_usd IS NULL) FROM hostcore.usage_daily "
                              "WHERE model = 'local-model-x'")
    assert unpriced is True


def test_rows_carry_usage_a_local_only_project_never_leaves_and_machine_is_the_host(
        pg, fleet):
    laptop = fleet.hosts[0]
    everything = {e["key"]: e for e in _usage(pg, laptop, "--by", "project")["entries"]}
    assert everything[SECRET]["input_tokens"] > 0, "the laptop has usage in it locally"
    assert SECRET not in {e["key"] for e in _usage(pg, laptop, "--by", "project",
                                                   "--exportable")["entries"]}
    assert pg.query("SELECT count(*) FROM hostcore.rows WHERE directory = %s",
                    (SECRET,)) == [(0,)]
    assert pg.query("SELECT count(*) FROM hostcore.usage_responses WHERE directory = %s",
                    (SECRET,)) == [(0,)]
    ((usage,),) = pg.query("SELECT payload -> 'usage' FROM hostcore.rows "
                           "WHERE payload -> 'usage' IS NOT NULL LIMIT 1")
    assert set(KINDS) | {"model", "response"} <= set(usage)
    ((sessions,),) = pg.query("SELECT count(*) FROM hostcore.rows "
                              "WHERE payload -> 'summary' IS NOT NULL")
    assert sessions > 0, "the sessions' summary lines (no cwd of their own) left too"
    # Locally the machine is this host's name, which fleet.md asks the role to be named for.
    report = _usage(pg, laptop, "--by", "machine")
    assert [e["key"] for e in report["entries"]] == [socket.gethostname()]
    assert report["entries"][0]["input_tokens"] == report["totals"]["input_tokens"] > 0


def test_fleet_md_team_queries_as_printed_give_the_hosts_figures(pg, fleet):
    setup = DOCS.sql_block("-- usage: whose machines are whose", DOCS.FLEET)
    for host in fleet.hosts:
        setup = setup.replace(f"'{host.doc_name}'", f"'{host.machine.role}'")
    for statement in DOCS.statements(setup):
        pg.query(statement)
    per_person, per_project, per_model, zoned = (
        pg.query(q) for q in DOCS.statements(DOCS.sql_block(
            "-- usage per person (all of their machines) and day", DOCS.FLEET)))

    expected: dict[Any, list[Any]] = {}
    for host, report in zip(fleet.hosts, fleet.local(pg, "--by", "day", "--tz", "UTC"),
                            strict=True):
        for entry in report["entries"]:
            _add(expected, (host.person, entry["key"]), _figures(entry))
    found: dict[Any, list[Any]] = {}
    for person, day, *figures in per_person:
        _add(found, (person, day.isoformat()), _figures(tuple(figures)))
    _same(expected, found)

    expected = {}
    for report in fleet.local(pg, "--by", "project"):
        for entry in report["entries"]:
            for model, figures in entry["models"].items():
                _add(expected, (entry["key"], model), _figures(figures))
    found = {}
    for project, model, *figures in per_project:
        _add(found, (project, model), _figures(tuple(figures)))
    _same(expected, found)
    shared = [p for p, _ in found if p == SHARED]
    assert shared, "the project the three machines share is one project"

    expected = {}
    for report in fleet.local(pg, "--by", "model"):
        for entry in report["entries"]:
            _add(expected, entry["key"], _figures(entry))
    found = {}
    machines: dict[str, int] = {}
    for model, count, *figures in per_model:
        _add(found, model, _figures(tuple(figures)))
        machines[model] = count
    _same(expected, found)
    assert set(machines.values()) == {3}
    costs = [row[-1] for row in per_model]
    priced = [c for c in costs if c is not None]
    assert priced == sorted(priced, reverse=True) and costs[-1] is None

    expected = {}
    for host, report in zip(fleet.hosts, fleet.local(pg, "--by", "day", "--tz",
                                                     "Europe/Paris"), strict=True):
        for entry in report["entries"]:
            _add(expected, (host.machine.role, entry["key"]), _figures(entry))
    found = {}
    for machine, day, *figures in zoned:
        _add(found, (machine, day.isoformat()), _figures(tuple(figures)))
    _same(expected, found)
