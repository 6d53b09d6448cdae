"""The export's back-off against a real server: many hosts after a restart come back
spread over the window, not on one tick; a statement timeout says which setting to
change, and with it changed the export completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hostcore_postgres.destination import PostgresDestination

WORKER = Path(__file__).with_name("fleet_worker.py")
HOSTS = 12
WINDOW = 6.0  # seconds: the back-off after one failure is drawn from [3, 6]
BUCKET = 0.25  # seconds: five of the workers' ticks


def test_hosts_failing_together_at_a_server_restart_retry_spread_over_the_window(
        pg, tmp_path):
    owner = PostgresDestination(pg.dsn)
    owner.migrate()
    owner.close()
    go = tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    procs = [subprocess.Popen([sys.executable, str(WORKER), "ticks", str(tmp_path / f"h{n}"),
                               pg.dsn, str(go), str(WINDOW)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for n in range(HOSTS)]
    for proc in procs:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"ready": True}, proc.stderr
    pg.server.stop("fast")
    try:
        go.touch()
        failed = []
        for proc in procs:  # every host's first run after the stop fails
            assert proc.stdout is not None
            failed.append(json.loads(proc.stdout.readline())["failed"])
    finally:
        pg.server.start()
    restarted = time.time()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))

    retries = []
    for first_failure, report in zip(failed, reports, strict=True):
        # The one failure, then nothing until the back-off ran out: the retry is the
        # run that succeeded, at least half the window after the failure.
        assert report["attempts"] == [first_failure, report["succeeded"]]
        assert report["succeeded"] - first_failure >= WINDOW / 2
        assert report["succeeded"] - first_failure <= WINDOW + 3, "it came back in time"
        retries.append(report["succeeded"])
        assert pg.held(report["origin"]) == list(range(1, 71)), "0 lost, 0 duplicated"
    assert min(retries) >= restarted - 0.1 or min(retries) - min(failed) >= WINDOW / 2
    buckets = [int((t - min(retries)) / BUCKET) for t in retries]
    assert len(set(buckets)) >= 4, f"retries bunched into {sorted(buckets)}"
    assert max(buckets.count(b) for b in buckets) <= HOSTS // 2, "not in one tick"
    assert max(retries) - min(retries) >= WINDOW / 6


def test_a_statement_timeout_names_batch_rows_and_a_smaller_batch_completes(pg, tmp_path):
    PostgresDestination(pg.dsn).migrate()
    # Every row costs the server 2 ms, so 1,000 rows in one COPY outlast a 1 s timeout
    # and 50 do not.
    pg.query("CREATE FUNCTION hostcore.slow() RETURNS trigger LANGUAGE plpgsql AS "
             "$$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$")
    pg.query("CREATE TRIGGER slow BEFORE INSERT ON hostcore.rows FOR EACH ROW "
             "EXECUTE FUNCTION hostcore.slow()")
    dsn = f"{pg.dsn} options='-c statement_timeout=1000'"
    root = tmp_path / "root"
    export = {"backoff_seconds": 0.1, "backoff_max_seconds": 0.1}
    origin = pg.fill_root(root, {"plugins": {"postgres-destination": {"dsn": dsn},
                                             "export": export}}, rows=1000)
    failed = pg.hostcore(root, "export", "-d", "postgres")
    assert failed.returncode == 1
    (line,) = [line for line in failed.stderr.splitlines() if line.strip()]
    assert "cancelled the push of 1000 row(s) at this role's statement_timeout" in line
    assert "[plugins.export] batch_rows" in line
    assert pg.held(origin) == []

    pg.fill_root(root, {"plugins": {"postgres-destination": {"dsn": dsn},
                                    "export": {**export, "batch_rows": 50}}}, rows=0)
    time.sleep(0.2)  # the back-off after the failure
    done = pg.hostcore(root, "export", "-d", "postgres")
    assert done.returncode == 0, done.stderr
    assert pg.held(origin) == list(range(1, 1001))
