"""The back-off after a failed export run, for every destination, and ``batch_rows``.

Against the real directory destination, whose folder is made unusable the way a
disk is (a file where the folder should be): the run fails with a real OSError.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest

from hostcore.errors import ConfigError, HostcoreError
from hostcore.evidence.store import EvidenceRow
from hostcore.export.destinations import destination_key, select_destination
from hostcore.export.exporter import (
    BACKOFF_PATH,
    AdoptRefused,
    BackoffFile,
    ExportDeferred,
    Exporter,
    backoff_delay,
)
from hostcore.timestamps import parse

BASE, CAP = 30.0, 600.0


class Clock:
    """The time the exporter sees, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def outbox(tmp_path: Path) -> Path:
    return tmp_path / "outbox"


def config(outbox: Path, **export: object) -> dict:
    return {"plugins": {"directory-destination": {"path": str(outbox)},
                        "export": {"backoff_seconds": BASE, "backoff_max_seconds": CAP,
                                   **export}}}


@pytest.fixture
def host(make_host, outbox):
    host = make_host(directory_plugin, config=config(outbox))
    host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                  directory="/work/a", payload={"n": i}) for i in range(20))
    return host


def break_folder(outbox: Path) -> None:
    outbox.parent.mkdir(parents=True, exist_ok=True)
    outbox.write_text("a file where the destination's folder should be")


def standing(host):
    return BackoffFile(host.root).load(destination_key(select_destination(host)))


def test_a_failed_run_defers_the_next_until_its_jittered_time_contacting_nothing(
        host, outbox):
    clock = Clock()
    break_folder(outbox)
    exporter = Exporter(host, select_destination(host), clock=clock)
    with pytest.raises(HostcoreError, match="cannot be read"):
        exporter.run()
    backoff = standing(host)
    assert backoff is not None and backoff.failures == 1
    retry_at = parse(backoff.retry_at)
    assert retry_at is not None
    assert clock.now + timedelta(seconds=BASE / 2) <= retry_at <= clock.now + timedelta(
        seconds=BASE)

    outbox.unlink()  # the destination is fine again, but the back-off stands
    clock.now = retry_at - timedelta(seconds=1)
    with pytest.raises(ExportDeferred) as deferred:
        exporter.run()
    assert deferred.value.retry_at == backoff.retry_at
    assert not outbox.exists(), "a deferred run contacted nothing"
    assert "next attempt at" in exporter.report().as_status()["backoff"]

    clock.now = retry_at
    assert exporter.run().rows == 20
    assert not (host.root / BACKOFF_PATH).exists(), "a success clears the back-off"
    assert "backoff" not in exporter.report().as_status()


def test_failures_in_a_row_double_the_window_up_to_the_cap(host, outbox):
    clock = Clock()
    break_folder(outbox)
    exporter = Exporter(host, select_destination(host), clock=clock)
    windows = []
    for failures in range(1, 8):
        with pytest.raises(HostcoreError, match="cannot be read"):
            exporter.run()
        backoff = standing(host)
        assert backoff is not None and backoff.failures == failures
        retry_at = parse(backoff.retry_at)
        assert retry_at is not None
        delay = (retry_at - clock.now).total_seconds()
        window = min(CAP, BASE * 2 ** (failures - 1))
        assert window / 2 <= delay <= window
        windows.append(window)
        clock.now = retry_at
    assert windows == [30, 60, 120, 240, 480, 600, 600]


def test_a_retry_time_beyond_the_longest_back_off_reads_as_due(host, outbox):
    """A clock set back since the failure must not stop the export for days."""
    clock = Clock()
    break_folder(outbox)
    exporter = Exporter(host, select_destination(host), clock=clock)
    with pytest.raises(HostcoreError):
        exporter.run()
    outbox.unlink()
    clock.now -= timedelta(days=3)
    assert exporter.run().rows == 20


def test_delays_are_drawn_across_the_window_not_one_value():
    delays = [backoff_delay(3, BASE, CAP) for _ in range(400)]
    window = BASE * 4
    assert all(window / 2 <= d <= window for d in delays)
    tenths = {int((d - window / 2) / (window / 20)) for d in delays}
    assert len(tenths) == 10, "every tenth of the window is drawn"


def test_a_refused_adoption_is_the_operators_not_the_destinations_and_sets_no_back_off(
        host):
    with pytest.raises(AdoptRefused):
        Exporter(host, select_destination(host)).run(adopt={"context": "0000000"})
    assert standing(host) is None


def test_cron_runs_of_hostcore_export_honour_the_back_off_and_status_shows_it(
        tmp_path, outbox):
    """Each run a new process: the back-off is read from the root, not kept in memory."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{outbox}"\n'
        f"[plugins.export]\nbackoff_seconds = 600\n")
    break_folder(outbox)

    def hostcore(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": "directory-destination",
               "PATH": "/usr/bin:/bin"}
        return subprocess.run([sys.executable, "-m", "hostcore", *args], env=env,
                              capture_output=True, text=True, timeout=120)

    first = hostcore("export")
    assert first.returncode == 1
    outbox.unlink()
    second = hostcore("export")
    assert second.returncode == 1
    assert "export deferred: 1 run(s) in a row failed" in second.stderr
    assert "backoff_seconds" in second.stderr
    assert not outbox.exists()
    status = hostcore("status", "--json")
    assert status.returncode == 0, status.stderr
    export = json.loads(status.stdout)["components"]["worker"]["export"]
    assert export["backoff"].startswith("1 run(s) in a row failed")


def test_batch_rows_sets_the_rows_of_each_push(make_host, outbox):
    host = make_host(directory_plugin, config=config(outbox, batch_rows=7))
    host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                  directory="/work/a", payload={"n": i}) for i in range(20))
    exporter = Exporter(host, select_destination(host))
    assert exporter.batch_rows == 7
    summary = exporter.run()
    assert summary.rows == 20
    assert summary.batches == 1 + 3, "the governance push, then 7 + 7 + 6 rows"


@pytest.mark.parametrize("bad", [{"batch_rows": 0}, {"backoff_seconds": 0},
                                 {"backoff_max_seconds": -1}])
def test_a_setting_out_of_range_is_a_config_error_naming_it(make_host, outbox, bad):
    host = make_host(directory_plugin, config=config(outbox, **bad))
    with pytest.raises(ConfigError, match=next(iter(bad))):
        Exporter(host, select_destination(host))
