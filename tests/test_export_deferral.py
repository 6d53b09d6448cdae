"""A tick inside the export back-off is deferred work, not a failed step.

The attempt that fails is seen by cron as ``run --once`` exiting 1; the ticks of the
back-off it schedules contact nothing, count ``deferred`` and exit 0, and ``status``
shows the back-off with its next attempt. Against the real directory destination made
unusable the way a disk is (a file where its folder should be), each ``hostcore`` a
new process, as cron runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.export.exporter import BACKOFF_PATH, Backoff
from hostcore.host import Host
from hostcore.timestamps import parse

ROWS = 5


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{tmp_path / "outbox"}"\n'
        # Far longer than the test: every tick after a failure falls inside the back-off.
        "[plugins.export]\nbackoff_seconds = 3600\nbackoff_max_seconds = 7200\n")
    with Host(root=root) as host:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory="/work/a", payload={"n": i})
                          for i in range(ROWS))
    return root


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    return tmp_path / "outbox"


def hostcore(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Wide enough that the status screen's component line is never cut before its value.
    env = {"HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": "directory-destination",
           "PATH": "/usr/bin:/bin", "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "hostcore", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def break_folder(outbox: Path) -> None:
    outbox.write_text("a file where the destination's folder should be")


def status(root: Path) -> dict[str, Any]:
    shown = hostcore(root, "status", "--json")
    assert shown.returncode == 0, shown.stderr
    report: dict[str, Any] = json.loads(shown.stdout)
    return report


def export_step(report: dict[str, Any]) -> dict[str, Any]:
    step: dict[str, Any] = report["last_tick"]["steps"]["export"]
    return step


def backoff(root: Path) -> Backoff:
    return msgspec.json.decode((root / BACKOFF_PATH).read_bytes(), type=Backoff)


def when(stamp: str) -> datetime:
    at = parse(stamp)
    assert at is not None, stamp
    return at


def make_due(root: Path) -> None:
    """Move the standing back-off's next attempt into the past, as time passing would."""
    standing = backoff(root)
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    (root / BACKOFF_PATH).write_bytes(
        msgspec.json.encode(msgspec.structs.replace(standing, retry_at=past)))


def test_the_failing_attempt_exits_1_and_the_ticks_of_its_back_off_exit_0_contacting_nothing(
        root: Path, outbox: Path) -> None:
    break_folder(outbox)
    failed = hostcore(root, "run", "--once")
    assert failed.returncode == 1, failed.stderr
    assert "step 'export' failed" in failed.stderr
    assert backoff(root).failures == 1

    outbox.unlink()  # the destination could be reached now: the back-off still stands
    deferred = hostcore(root, "run", "--once")
    assert deferred.returncode == 0, deferred.stderr
    assert "failed" not in deferred.stderr
    assert not outbox.exists()  # nothing was contacted
    assert backoff(root).failures == 1  # a deferral is no new failure

    report = status(root)
    assert report["last_tick"]["ok"] is True
    assert report["last_tick"]["pending"] is False
    step = export_step(report)
    assert step["ok"] is True and step["deferred"] == 1 and "error" not in step
    export = report["components"]["worker"]["export"]
    assert export["next_attempt_at"] == backoff(root).retry_at
    assert when(export["next_attempt_at"]) > datetime.now(UTC)
    assert export["backoff"].startswith("1 run(s) in a row failed")
    assert f"next attempt at {backoff(root).retry_at}" in export["backoff"]


def test_a_deferred_tick_shows_on_the_status_screen_with_the_next_attempt(
        root: Path, outbox: Path) -> None:
    break_folder(outbox)
    assert hostcore(root, "run", "--once").returncode == 1
    outbox.unlink()
    assert hostcore(root, "run", "--once").returncode == 0
    screen = hostcore(root, "status")
    assert screen.returncode == 0, screen.stderr
    lines = screen.stdout.splitlines()
    tick = next(line for line in lines if line.startswith("last tick:"))
    assert tick.startswith("last tick: ok")
    step = next(line.split() for line in lines if line.startswith("  export "))
    assert step == ["export", "ok", "deferred", "1"]
    # The component line leads with the standing back-off, the first thing to know.
    worker = next(line for line in lines if line.startswith("worker export "))
    state, key, value = worker.split()[2:5]
    assert (state, key, value.rstrip(",")) == ("ok", "next_attempt_at", backoff(root).retry_at)


def test_an_attempt_after_the_back_off_that_fails_again_exits_1_and_doubles_the_window(
        root: Path, outbox: Path) -> None:
    break_folder(outbox)
    assert hostcore(root, "run", "--once").returncode == 1
    first = backoff(root)
    make_due(root)
    again = hostcore(root, "run", "--once")
    assert again.returncode == 1, again.stderr
    assert "step 'export' failed" in again.stderr
    second = backoff(root)
    assert second.failures == 2
    window = (when(second.retry_at) - when(second.failed_at)).total_seconds()
    assert 3600 <= window <= 7200  # [w/2, w] for w = 2 x 3600
    assert when(first.retry_at) != when(second.retry_at)
    step = export_step(status(root))
    assert step["ok"] is False and "deferred" not in step


def test_an_attempt_after_the_back_off_that_succeeds_exports_and_clears_it(
        root: Path, outbox: Path) -> None:
    break_folder(outbox)
    assert hostcore(root, "run", "--once").returncode == 1
    outbox.unlink()
    make_due(root)
    done = hostcore(root, "run", "--once")
    assert done.returncode == 0, done.stderr
    assert not (root / BACKOFF_PATH).exists()
    report = status(root)
    step = export_step(report)
    assert step["ok"] is True and step["rows"] == ROWS and "deferred" not in step
    export = report["components"]["worker"]["export"]
    assert "backoff" not in export and "next_attempt_at" not in export
    assert export["position"] > 0 and export["rows_behind"] == 0
