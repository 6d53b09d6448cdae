"""SIGKILL a pushing process, restart the server under a push: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hostcore_postgres.plugin as postgres_plugin

from hostcore.export.exporter import Exporter
from hostcore.host import Host

WORKER = Path(__file__).with_name("fleet_worker.py")
TRIALS = 20
WAVE = 5  # trials run side by side, each its own store (origin)
PUSH_SECONDS = 0.02  # about one push of BATCH_ROWS rows here: the kill lands within one
ROWS = 3_000  # permitted rows per trial (as many again are withheld)
BATCH_ROWS = 200
ROWS_RESTART = 100_000
SEED = int(os.environ.get("HOSTCORE_KILL_SEED", random.randrange(2**32)))


def export(root: Path, dsn: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), "export", str(root), dsn,
                             str(BATCH_ROWS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def rerun(root: Path, pg) -> list[int]:
    """Run the export again, in this process, to the end; the positions the seam
    permits (what the database must now hold, each once)."""
    with Host(root=root, plugins=[postgres_plugin], load_entrypoints=False, env={},
              config=pg.config()) as host:
        (destination,) = host.destinations
        assert Exporter(host, destination).run().done
        return [p for (p,) in host.seam.read_rows_since_sync(None, 0, ())]


def test_sigkill_at_random_points_then_a_rerun_loses_and_duplicates_nothing(pg, tmp_path):
    """Each trial lets a random number of pushes commit, then kills after a random
    fraction of one more: mid-transaction, mid-COPY, between pushes, or before any."""
    rng = random.Random(SEED)
    roots = [tmp_path / f"trial-{n}" for n in range(TRIALS)]
    origins = [pg.fill_root(root, rows=ROWS, directories=("/work/a", "/work/secret"),
                            withheld=("/work/secret",)) for root in roots]
    pushes = 1 + ROWS // BATCH_ROWS  # the governance push, then the rows
    plans = [(rng.randrange(pushes), rng.uniform(0.0, PUSH_SECONDS)) for _ in roots]

    def trial(root: Path, plan: tuple[int, float]) -> None:
        acknowledged, delay = plan
        proc = export(root, pg.dsn)
        assert proc.stdout is not None
        for _ in range(acknowledged):
            if proc.stdout.readline() != "pushed\n":
                break
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()

    with ThreadPoolExecutor(max_workers=WAVE) as pool:
        list(pool.map(trial, roots, plans))
    held = [len(pg.held(origin)) for origin in origins]
    for root, origin in zip(roots, origins, strict=True):
        expected = rerun(root, pg)
        assert pg.held(origin) == expected, f"seed {SEED}: lost or duplicated rows"
    assert pg.query("SELECT count(*) FROM hostcore.rows WHERE directory = '/work/secret'") == [
        (0,)]
    # The kills must have landed mid-export for the test to mean anything.
    midway = sum(0 < n < ROWS for n in held)
    assert midway >= TRIALS // 2, f"seed {SEED}: only {midway} kills mid-export ({held})"


def test_a_server_restart_mid_push_fails_clearly_and_the_next_push_succeeds(pg, tmp_path):
    root = tmp_path / "root"
    origin = pg.fill_root(root, pg.config(), rows=ROWS_RESTART, text="y" * 200)
    proc = pg.spawn(root, "export", "-d", "postgres")
    deadline = time.monotonic() + 60
    while not pushed_any(pg):
        assert time.monotonic() < deadline and proc.poll() is None, "the export never pushed"
        time.sleep(0.02)
    pg.server.restart()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert "connection to the server was lost during the push" in lines[0]
    assert 0 < len(pg.held(origin)) < ROWS_RESTART

    rerun = pg.hostcore(root, "export", "-d", "postgres", "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert pg.held(origin) == list(range(1, ROWS_RESTART + 1))
    assert json.loads(rerun.stdout)["done"] is True


def pushed_any(pg) -> bool:
    import psycopg

    try:
        return bool(pg.query("SELECT 1 FROM hostcore.rows LIMIT 1"))
    except psycopg.errors.UndefinedTable:  # the first push has not created it yet
        return False


def test_an_idle_connection_the_server_dropped_is_replaced_before_a_read(pg):
    from hostcore_postgres.destination import PostgresDestination

    destination = PostgresDestination(pg.dsn)
    try:
        assert destination.published("main", "o").content == 0
        # What idle_session_timeout or a pooler's recycling does to an idle client.
        pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE application_name = 'hostcore-postgres'")
        assert destination.published("main", "o").content == 0
    finally:
        destination.close()
