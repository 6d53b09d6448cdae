"""Integration: ``hostcore poll --once`` run as separate processes, cron-style, with the
fake gh. A closed item the poller only ever listed ends as ended only within one window
plus ceil(N / cap) cycles, N being the ledger-only records due with it. Time passing is
fabricated by writing the records' timestamps one window into the past."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import msgspec

from hostcore.timestamps import format_utc
from hostcore.timestamps import parse_exact as parse_utc
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import LEDGER_CHECKS_PER_CYCLE, LEDGER_RECHECK_EVERY_CYCLES

INTERVAL = 1.0  # seconds: the window is LEDGER_RECHECK_EVERY_CYCLES of these (60 s)
PLANTED = 44


def poll_once(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "hostcore", "poll", "--once", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (summary,) = json.loads(done.stdout)
    return summary


def questions(fake_gh) -> list[str]:
    return [c["path"] for c in fake_gh.calls() if c["path"].startswith("repos/o/r/issues/")]


def test_closed_listed_item_ends_ended_only_within_window_plus_drain(fake_gh, tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f"[poll]\ninterval_seconds = {INTERVAL}\n"
        '[plugins.gh]\nrepos = ["o/r"]\nlabels = ["agent"]\n')
    env = {**os.environ, **fake_gh.env, "HOSTCORE_ROOT": str(root),
           "HOSTCORE_LOAD_PLUGINS": "hostcore-gh"}
    listing = {"state": "open", "labels": "agent", "page": "1"}
    fake_gh.route("repos/o/r/issues", fake_gh.reply(200, [
        {"number": 1, "title": "agent work", "updated_at": "2026-01-01T00:00:00Z"}]),
        fake_gh.reply(200, []), query=listing)  # listed once, then gone from the listing
    fake_gh.route("repos/o/r/issues/1", fake_gh.reply(200, {
        "number": 1, "state": "closed", "state_reason": "completed"}))
    for n in range(100, 100 + PLANTED):
        fake_gh.route(f"repos/o/r/issues/{n}", fake_gh.reply(200, {"number": n,
                                                                   "state": "open"}))

    first = poll_once(env)
    assert first["new"] == 1 and first["listing"] == "complete"
    ledger = Ledger(root / "ledger")
    seen = ledger.read("o/r#1")
    assert seen is not None and seen.poll is not None and seen.ended is None
    seen_at = parse_utc(seen.poll.last_polled_at)
    assert seen_at is not None
    # Planted poll-only records, absent a second longer than the item: ahead of it.
    for n in range(100, 100 + PLANTED):
        ledger.write(PortableRecord(ref=f"o/r#{n}", poll=PollSection(
            last_polled_at=format_utc(seen_at - timedelta(seconds=1)))))
    ledger.close()

    early = poll_once(env)  # gone from the listing, but not absent for a window yet
    assert early["listed"] == 0 and early["ledger_checks"] == 0 and questions(fake_gh) == []
    assert Ledger(root / "ledger").read("o/r#1").ended is None

    # Let the window pass without waiting for it: move every record's clock back by
    # one window (and a second), keeping their order.
    window = timedelta(seconds=LEDGER_RECHECK_EVERY_CYCLES * INTERVAL + 1)

    def earlier(record: PortableRecord) -> PortableRecord:
        then = format_utc(parse_utc(record.poll.last_polled_at) - window)
        return msgspec.structs.replace(
            record, poll=msgspec.structs.replace(record.poll, last_polled_at=then))

    ledger = Ledger(root / "ledger")
    for n in [1, *range(100, 100 + PLANTED)]:
        ledger.update(f"o/r#{n}", earlier)
    ledger.close()

    allowed = math.ceil((PLANTED + 1) / LEDGER_CHECKS_PER_CYCLE)
    cycles = 0
    while cycles < allowed + 2:
        fake_gh.clear_calls()
        summary = poll_once(env)
        cycles += 1
        assert len(questions(fake_gh)) == summary["ledger_checks"] <= LEDGER_CHECKS_PER_CYCLE
        record = Ledger(root / "ledger").read("o/r#1")
        if record.ended is not None:
            break
    assert cycles <= allowed
    assert record.ended.state == "closed" and record.ended.state_reason == "completed"
    assert record.poll is None and record.session is None and record.control is None
    on_disk = json.loads(Ledger(root / "ledger").path_for("o/r#1").read_text())
    assert set(on_disk) == {"ref", "ended"}  # ended only, never deleted
    # Nothing was stamped on doubt: every planted record is still open, now dated.
    for n in range(100, 100 + PLANTED):
        planted = Ledger(root / "ledger").read(f"o/r#{n}")
        assert planted.ended is None
