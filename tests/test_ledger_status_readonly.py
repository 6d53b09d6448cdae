"""``hostcore status`` reads the ledger's on-disk index read-only: no record is read
while the index is fresh, only the changed ones when it is not, and nothing under the
root is written, even on a root mounted read-only."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from hostcore.workitems.ledger import EndedStamp, Ledger, PollSection, PortableRecord, encode_record


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: size, mtime and a digest of its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            stat = path.stat()
            found[str(path.relative_to(root))] = (
                stat.st_size, stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def large_ledger(folder: Path, live: int, archived: int) -> Ledger:
    """``live`` poll-only records and ``archived`` ended ones moved into the archive,
    written as files and indexed the way a poll cycle leaves them."""
    ledger = Ledger(folder)
    ledger.portable.mkdir(parents=True, exist_ok=True)
    for n in range(live):
        record = PortableRecord(ref=f"o/live#{n}", poll=PollSection(
            last_polled_at="2026-05-01T00:00:00Z"))
        ledger.path_for(record.ref).write_bytes(encode_record(record))
    for n in range(archived):
        record = PortableRecord(ref=f"o/done#{n}", ended=EndedStamp(
            at="2026-01-01T00:00:00Z", state="closed"))
        ledger.path_for(record.ref).write_bytes(encode_record(record))
    ledger.rebuild_index()
    assert ledger.archive_ended("2026-02-01T00:00:00Z").archived == archived
    ledger.close()
    return ledger


EXPECTED = {"records": 3_000, "ended": 1_000, "tracked": 0, "ledger_only": 2_000,
            "malformed": 0, "archived": 1_000}


def test_status_with_a_fresh_index_reads_no_record_and_writes_nothing(tmp_path):
    large_ledger(tmp_path / "ledger", 2_000, 1_000)
    before = snapshot(tmp_path)
    reader = Ledger(tmp_path / "ledger", read_only=True)
    assert reader.status() == EXPECTED
    assert reader.counters.reads == 0 and reader.counters.index_rebuilds == 0
    reader.close()
    assert snapshot(tmp_path) == before


def test_status_behind_a_stale_index_reads_only_the_changed_records_and_writes_nothing(
        tmp_path):
    ledger = large_ledger(tmp_path / "ledger", 2_000, 1_000)
    time.sleep(0.02)  # past the file system's clock tick: the folder's mtime moves
    extra = PortableRecord(ref="o/late#1", session={"id": "s"})
    path = ledger.path_for(extra.ref)
    path.with_suffix(".tmp").write_bytes(encode_record(extra))
    path.with_suffix(".tmp").rename(path)  # a writer that bypassed the ledger
    before = snapshot(tmp_path)
    reader = Ledger(tmp_path / "ledger", read_only=True)
    assert reader.status() == {**EXPECTED, "records": 3_001, "tracked": 1}
    assert reader.counters.reads == 1 and reader.counters.index_rebuilds == 0
    reader.close()
    assert snapshot(tmp_path) == before


def test_status_over_an_index_of_another_format_derives_counts_in_memory_only(tmp_path):
    ledger = large_ledger(tmp_path / "ledger", 200, 100)
    db = sqlite3.connect(ledger.index_path)
    db.execute("UPDATE meta SET value = '3' WHERE key = 'format'")  # an older hostcore's
    db.commit()
    db.close()
    before = snapshot(tmp_path)
    reader = Ledger(tmp_path / "ledger", read_only=True)
    assert reader.status() == {"records": 300, "ended": 100, "tracked": 0,
                               "ledger_only": 200, "malformed": 0, "archived": 100}
    assert reader.counters.reads == 200  # the live records, never the archived ones
    reader.close()
    assert snapshot(tmp_path) == before


def test_hostcore_status_on_a_root_mounted_read_only_reports_the_ledger(
        tmp_path, mount_namespace):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    large_ledger(root / "ledger", 2_000, 1_000)
    before = snapshot(root)
    script = (f'mount --bind "{root}" "{root}" && mount -o remount,bind,ro "{root}" && '
              f'exec "{sys.executable}" -m hostcore status --json')
    out = subprocess.run(
        [*mount_namespace, "sh", "-c", script], capture_output=True, text=True, timeout=120,
        env={**os.environ, "HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": ""})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["components"]["worker"]["poll"]["ledger"] == EXPECTED
    assert snapshot(root) == before
