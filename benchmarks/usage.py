"""Benchmark: ``hostcore usage`` over a store of a million rows that carry usage.

Builds a store through :class:`hostcore.evidence.store.Store` (its triggers keep
the usage aggregate as rows go in): 1,000,000 rows (50,000 with ``--quick``) of
2,000 sessions in 40 project folders (rows ten seconds apart), six models, over
90 days, one assistant row
in two carrying a response's usage (every third response on two rows). Then
times, each the median of five:

* ``hostcore usage --json`` as a process, by day and by session: its wall clock
  and its CPU time (target <= 1 s, judged by CPU time: on a shared machine the
  wall clock of a process start moves by seconds; it reads the aggregate, not
  the rows), and the report's own read (``read_report`` in this process);
* for scale, a scan of every row's payload summing the same tokens in SQLite,
  and the ratio of the two.

Usage: ``python benchmarks/usage.py [--quick] [--rows N] [--dir PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_SECONDS = 1.0
SESSIONS = 2_000
PROJECTS = 40
MODELS = ("claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5", "gpt-5-codex",
          "gpt-5", "local-model")
BATCH = 20_000
RUNS = 5
HOSTCORE = str(Path(sys.executable).parent / "hostcore")


def build(root: Path, rows: int) -> None:
    from hostcore.evidence.rows import EvidenceRow
    from hostcore.evidence.store import STORE_FILE_NAME, Store
    from hostcore.evidence.usage_fields import response_digest, tokens

    root.mkdir(parents=True)
    store = Store(root / STORE_FILE_NAME)
    rng = random.Random(5)
    start = 1_760_000_000
    batch: list[EvidenceRow] = []
    for n in range(rows):
        session = n * SESSIONS // rows
        # A session's rows follow each other ten seconds apart, as an agent's do.
        moment = start + session * 90 * 86_400 // SESSIONS + n % (rows // SESSIONS) * 10
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
        payload: dict[str, object] = {"type": "assistant" if n % 2 else "user"}
        if n % 2:
            response = n // 2 - (1 if n % 6 == 5 else 0)
            payload["usage"] = tokens(
                MODELS[session % len(MODELS)],
                (rng.randrange(5_000), rng.randrange(3_000), rng.randrange(30_000),
                 rng.randrange(90_000)), response_digest(str(session), str(response)))
        batch.append(EvidenceRow(partition="claude-code", source_id="claude-code",
                                 session_id=f"session-{session:05d}", ts=ts,
                                 directory=f"/work/project-{session % PROJECTS:02d}",
                                 payload=payload, key=f"{session}:{n}"))
        if len(batch) == BATCH:
            store.append(batch)
            batch = []
    if batch:
        store.append(batch)
    store.close()


def timed_usage(root: Path, by: str) -> tuple[float, float, dict[str, Any]]:
    """Wall clock and CPU time of ``hostcore usage`` (medians), and its report."""
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "", "TZ": "UTC"}
    times, cpu = [], []
    report: dict[str, Any] = {}
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([HOSTCORE, "--root", str(root), "usage", "--json", "--by", by],
                              env=env, capture_output=True, text=True, timeout=120)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"hostcore usage failed:\n{done.stderr[-2000:]}")
        report = json.loads(done.stdout)
    return statistics.median(times), statistics.median(cpu), report


def timed_read(root: Path) -> float:
    """The report's own read, in this process (median seconds)."""
    from hostcore.evidence.prices import load_prices
    from hostcore.evidence.store import STORE_FILE_NAME
    from hostcore.evidence.usage import read_report

    prices = load_prices()
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        read_report(root / STORE_FILE_NAME, prices, by="session")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timed_scan(root: Path) -> tuple[float, int]:
    from hostcore.evidence.store import STORE_FILE_NAME

    times = []
    total = 0
    for _ in range(RUNS):
        db = sqlite3.connect(root / STORE_FILE_NAME)
        started = time.perf_counter()
        total = db.execute("SELECT SUM(payload ->> '$.usage.input_tokens') FROM evidence "
                           "WHERE payload ->> '$.usage.response' IS NOT NULL").fetchone()[0]
        times.append(time.perf_counter() - started)
        db.close()
    return statistics.median(times), total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50,000 rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    rows = args.rows or (50_000 if args.quick else 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="hostcore-usage-bench-", dir=args.dir))
    try:
        root = work / "root"
        started = time.perf_counter()
        build(root, rows)
        print(f"store: {rows:,} rows, {SESSIONS:,} sessions (built in "
              f"{time.perf_counter() - started:.1f} s)")
        scan, scanned = timed_scan(root)
        for by in ("day", "session"):
            seconds, cpu, report = timed_usage(root, by)
            verdict = "PASS" if cpu <= TARGET_SECONDS else "MISS"
            print(f"hostcore usage --by {by} over {rows:,} rows: {cpu:.3f} s CPU, {seconds:.3f} "
                  f"s wall, medians of {RUNS} (target <= {TARGET_SECONDS:g} s) {verdict}; "
                  f"{len(report['entries']):,} entries")
            # Deduplicated: less than the sum over every row that repeats a response.
            assert report["totals"]["input_tokens"] < scanned
        read = timed_read(root)
        print(f"the report's read alone: {read:.3f} s; a scan of every row's usage in "
              f"SQLite: {scan:.3f} s; ratio of the read to the scan {read / scan:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
