"""Benchmark: poll cycles over a large ledger, and rebuilding its index.

A ledger of N poll-only records (10,000 by default) and a provider double that
answers instantly, in process (no gh subprocess: the figures are the poller's
and the ledger's own cost, not GitHub's). Measured, each also as a ratio to
reading the same N record files raw (open + read, no decoding) in the same run:

* a cycle with nothing due: time, record files read, writes (target: 0 writes,
  under 50 ms), in a fresh process-like Ledger (index opened and checked) and warm;
* a cycle with 100 due: time, questions, writes (target: exactly 20 and 20);
* rebuilding the index from the N records.

Usage: ``python benchmarks/poll_cycle.py [--records N] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hostcore.timestamps import format_utc
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord, encode_record
from hostcore.workitems.poller import LEDGER_CHECKS_PER_CYCLE, LEDGER_RECHECK_EVERY_CYCLES, Poller
from hostcore.workitems.items import Closure, Listing, ScopeListing

INTERVAL = 60.0
DUE = 100


class InstantProvider:
    """Answers every listing (complete, empty) and every closure question at once."""

    name = "instant"

    def __init__(self) -> None:
        self.questions = 0

    def owns(self, ref: object) -> bool:
        return True

    def scope_of(self, ref: object) -> str:
        return "o/r"

    def list_items(self) -> Listing:
        return Listing((ScopeListing(scope="o/r", status="complete"),))

    def closure(self, ref: object) -> Closure:
        self.questions += 1
        return Closure(state="open")


def plant(folder: Path, count: int, now: datetime) -> None:
    """Write ``count`` records straight to disk (setup only, not measured)."""
    ledger = Ledger(folder)
    ledger.portable.mkdir(parents=True, exist_ok=True)
    recent = format_utc(now - timedelta(minutes=5))
    for n in range(count):
        record = PortableRecord(ref=f"owner/repo#{n}", poll=PollSection(
            last_polled_at=recent, updated_at="2026-01-01T00:00:00Z"))
        ledger.path_for(record.ref).write_bytes(encode_record(record))


def read_raw(folder: Path) -> float:
    started = time.perf_counter()
    portable = folder / "portable"
    for name in os.listdir(portable):
        with open(portable / name, "rb") as handle:
            handle.read()
    return time.perf_counter() - started


def cycle(ledger: Ledger, provider: InstantProvider, now: datetime) -> tuple[float, int, int]:
    poller = Poller(ledger, [provider], dispatch=lambda event: 0,
                    emit=lambda *a, **k: None, interval=lambda: INTERVAL, clock=lambda: now)
    reads, writes = ledger.counters.reads, ledger.counters.writes
    started = time.perf_counter()
    poller.cycle()
    elapsed = time.perf_counter() - started
    return elapsed, ledger.counters.reads - reads, ledger.counters.writes - writes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 records")
    args = parser.parse_args(argv)
    count = 1_000 if args.quick else args.records
    now = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ledger"
        plant(folder, count, now)
        read_raw(folder)  # warm the page cache the same way for everything measured
        raw = min(read_raw(folder) for _ in range(3))

        ledger = Ledger(folder)
        started = time.perf_counter()
        ledger.rebuild_index()
        rebuild = time.perf_counter() - started
        ledger.close()

        cold_provider = InstantProvider()
        cold = Ledger(folder)  # as a new `poll --once` process: opens and checks the index
        cold_time, cold_reads, cold_writes = cycle(cold, cold_provider, now)
        warm_time, warm_reads, warm_writes = cycle(cold, cold_provider, now)

        old = format_utc(now - timedelta(seconds=LEDGER_RECHECK_EVERY_CYCLES * INTERVAL + 60))
        for n in range(DUE):
            cold.write(PortableRecord(ref=f"owner/repo#{n}", poll=PollSection(
                last_polled_at=old, updated_at="2026-01-01T00:00:00Z")))
        due_provider = InstantProvider()
        due_time, due_reads, due_writes = cycle(cold, due_provider, now)
        cold.close()

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"poll_cycle: {count} records; provider double in process, instant answers")
    print(f"  raw read of {count} record files: {raw * 1000:8.1f} ms (baseline)")
    rows = [
        ("nothing due, fresh ledger object", cold_time, f"reads {cold_reads}, "
         f"writes {cold_writes}, questions {cold_provider.questions}"),
        ("nothing due, warm", warm_time, f"reads {warm_reads}, writes {warm_writes}"),
        (f"{DUE} due", due_time, f"questions {due_provider.questions} "
         f"(cap {LEDGER_CHECKS_PER_CYCLE}), reads {due_reads}, writes {due_writes}"),
        ("index rebuild", rebuild, f"from {count} records"),
    ]
    for label, seconds, detail in rows:
        print(f"  {label:34} {seconds * 1000:8.1f} ms  ratio to raw {seconds / raw:6.3f}  "
              f"{detail}")
    print(f"  peak RSS: {peak_kib / 1024:.1f} MiB")
    ok = (cold_writes == 0 and warm_writes == 0 and cold_time < 0.05
          and due_provider.questions == LEDGER_CHECKS_PER_CYCLE
          and due_writes == LEDGER_CHECKS_PER_CYCLE)
    print(f"  targets (0 writes and < 50 ms when nothing is due; exactly "
          f"{LEDGER_CHECKS_PER_CYCLE} questions and writes with {DUE} due): "
          f"{'met' if ok else 'NOT met'}")
    return 0  # a missed target is reported above; only a crash exits non-zero


if __name__ == "__main__":
    sys.exit(main())
