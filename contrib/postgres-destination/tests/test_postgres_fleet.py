"""Many hosts, each its own store and process, pushing into one database at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hostcore_postgres.plugin as postgres_plugin

from hostcore.export.exporter import local_governance
from hostcore.export.ref import ABSENT
from hostcore.host import Host

WORKER = Path(__file__).with_name("fleet_worker.py")
HOSTS = 8
ROUNDS = 6
CAS_PROCESSES = 8
CAS_ATTEMPTS = 40


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def start_together(procs: list[subprocess.Popen[str]], go: Path) -> None:
    """Wait until every process is ready, then let them all go: they overlap however
    slowly the machine starts them."""
    for proc in procs:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": True}, proc.stderr
    go.touch()


def finish(proc: subprocess.Popen[str]) -> list[dict]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def permitted(root: Path, pg) -> tuple[list[int], set[int], object]:
    """(positions the seam permits, positions it withholds, the host's governance),
    read by a host built as the worker's was (its catalog is part of ``terms``)."""
    with Host(root=root, plugins=[postgres_plugin], load_entrypoints=False, env={},
              config=pg.config()) as host:
        allowed = [p for (p,) in host.seam.read_rows_since_sync(None, 0, ())]
        every = set(range(1, host.store.head_position() + 1))
        return allowed, every - set(allowed), local_governance(host)


def test_eight_hosts_pushing_at_once_each_hold_every_permitted_row_once(pg, tmp_path):
    roots = [tmp_path / f"host-{n}" for n in range(HOSTS)]
    go = tmp_path / "go"
    procs = [spawn("host", str(root), pg.dsn, str(ROUNDS), str(go)) for root in roots]
    start_together(procs, go)
    reports = [finish(proc)[0] for proc in procs]

    assert len({r["origin"] for r in reports}) == HOSTS
    for root, report in zip(roots, reports, strict=True):
        allowed, withheld, governance = permitted(root, pg)
        assert withheld, "each host has local-only rows"
        held = pg.held(report["origin"])
        assert held == allowed, "every permitted row once, in order, nothing else"
        assert not withheld & set(held)
        # Each host moved its own context every round and nobody else shares it:
        # no conflict, and the database publishes exactly this host's identities.
        assert report["conflicts"] == 0
        ((context, terms, decisions),) = pg.query(
            "SELECT context, terms, decisions FROM hostcore.refs WHERE origin = %s",
            (report["origin"],))
        assert (context, terms, decisions) == (governance.context, governance.terms,
                                               governance.decisions)
    total = sum(len(pg.held(r["origin"])) for r in reports)
    assert pg.query("SELECT count(*) FROM hostcore.rows") == [(total,)]
    assert pg.query("SELECT count(DISTINCT origin) FROM hostcore.exported") == [(HOSTS,)]


def test_a_shared_component_conflicts_exactly_when_another_writer_moved_it(pg, tmp_path):
    """Eight processes compare-and-swap one origin's context as fast as they can. Every
    accepted write expected the value the one before it set (one unbroken chain: no
    write was lost to a read racing another write), and every refused one expected a
    value that had moved."""
    go = tmp_path / "go"
    procs = [spawn("cas", pg.dsn, "shared-origin", f"w{n}", str(CAS_ATTEMPTS), str(go))
             for n in range(CAS_PROCESSES)]
    start_together(procs, go)
    attempts = [a for proc in procs for a in finish(proc)]
    assert len(attempts) == CAS_PROCESSES * CAS_ATTEMPTS
    accepted = [a for a in attempts if a["ok"]]
    refused = [a for a in attempts if not a["ok"]]
    assert refused, "eight writers on one component collide"
    assert all(a["found"] != a["expect"] for a in refused)

    after = {a["expect"]: a["set"] for a in accepted}
    assert len(after) == len(accepted), "two writes were accepted against the same value"
    chain, value = 0, ""
    while value in after:
        value, chain = after[value], chain + 1
    assert chain == len(accepted)
    ((final,),) = pg.query("SELECT context FROM hostcore.refs WHERE origin = 'shared-origin'")
    assert final == value
    assert ABSENT not in after.values()
