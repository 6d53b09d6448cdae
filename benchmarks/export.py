"""Export throughput to the directory destination, against the seam's own read rate.

Builds a store of permitted rows, then in the same run measures:

1. the seam: iterating ``read_rows_since_sync`` over every row (the baseline);
2. the export: ``Exporter.run()`` pushing every row to a fresh directory
   destination (fsync per push), as rows/s and as a ratio to (1). Target >= 0.6x.
   Both read through the seam, which compares the policy fingerprint between
   fetch chunks (so a policy change stops rows at the next chunk). The cost of
   those checks per batch is printed: one check alone, and the export run again
   with the check stubbed out (the difference, per batch);
3. resume after a kill: ``hostcore export`` in a subprocess is SIGKILLed once it has
   written about half, then the export runs again in this process. Reported: the
   bytes the destination re-read to find its position (target: under one segment),
   torn bytes it cut, rows the resume pushed, and rows it pushed twice (must be 0).

Each of (1) and (2) runs ``--repeat`` times (default 5), interleaved, and the ratio
is taken per run: its median, min and max are printed with PASS/MISS (PASS: the
median by wall at the target). The ratio is also given in process CPU time, which other load on
the machine disturbs less than wall time. Peak memory (max RSS of the process) is
printed after (2).

    python benchmarks/export.py            # 1,000,000 rows
    python benchmarks/export.py --quick    # 100,000 rows
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
from _figures import spread
from hostcore_directory_destination.destination import (
    SEGMENT_BYTES,
    DirectoryDestination,
    Recovery,
)

from hostcore.evidence.seam import FETCH_ROWS
from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import EXPORT_COLUMNS, ExportBatch
from hostcore.export.exporter import BATCH_ROWS, Exporter
from hostcore.export.ref import Ref
from hostcore.host import Host

DIRECTORIES = 50
SOURCES = ("claude", "codex", "other")
FINGERPRINT_CALLS = 2_000
RATIO_TARGET = 0.6



def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_store(root: Path, rows: int) -> None:
    host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
    try:
        host.store.append(
            EvidenceRow(partition="sessions", source_id=SOURCES[i % len(SOURCES)],
                        session_id=f"s{i // 500}", ts="2024-05-01T10:00:00Z",
                        directory=f"/work/project-{i % DIRECTORIES}",
                        git_remote=f"git@github.com:org/repo-{i % 97}.git",
                        payload={"n": i, "kind": "message", "text": "lorem ipsum " * 6})
            for i in range(rows)
        )
    finally:
        host.close()


def configure(root: Path, outbox: Path) -> None:
    (root / "hostcore.toml").write_text(f'[plugins.directory-destination]\npath = "{outbox}"\n')


def open_host(root: Path) -> Host:
    return Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})


def seam_rate(host: Host) -> tuple[int, float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    count = sum(1 for _ in host.seam.read_rows_since_sync(None, 0, EXPORT_COLUMNS))
    return count, time.perf_counter() - started, time.process_time() - cpu


class UncheckedPolicy:
    """Stubs ``host.policy.fingerprint`` (what the seam calls between chunks) with the
    value it has now, so an export runs without the per-chunk policy check: the
    baseline the check's cost per batch is measured against."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def __enter__(self) -> UncheckedPolicy:
        fingerprint = self.host.policy.fingerprint()
        self.host.policy.fingerprint = lambda: fingerprint  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc_info: object) -> None:
        del self.host.policy.fingerprint


def export_rate(host: Host, outbox: Path) -> tuple[int, float, float, int, int]:
    """(rows, wall s, CPU s, pushes of rows, policy checks) of one full export."""
    shutil.rmtree(outbox, ignore_errors=True)
    (host.root / "cache" / "refs.json").unlink(missing_ok=True)
    exporter = Exporter(host, DirectoryDestination(outbox))
    checks = host.seam.policy_checks
    started, cpu = time.perf_counter(), time.process_time()
    summary = exporter.run()
    wall, used = time.perf_counter() - started, time.process_time() - cpu
    pushes = summary.batches - (1 if summary.carried else 0)  # the governance push has no rows
    return summary.rows, wall, used, pushes, host.seam.policy_checks - checks


def unchecked_export_s(host: Host, outbox: Path) -> float:
    with UncheckedPolicy(host):
        return export_rate(host, outbox)[1]


def policy_check_ms(host: Host) -> float:
    """Median cost of one policy check alone (no export running beside it)."""
    host.policy.fingerprint()
    samples = []
    for _ in range(FINGERPRINT_CALLS):
        started = time.perf_counter()
        host.policy.fingerprint()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


class MeasuredDestination(DirectoryDestination):
    """Keeps what each push's recovery read, so the resume's first push can be shown."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.recoveries: list[Recovery] = []

    def push(self, batch: ExportBatch) -> Ref:
        try:
            return super().push(batch)
        finally:
            self.recoveries.append(self.last_recovery)


def held_lines(outbox: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in outbox.glob("main/*/*.jsonl"))


def kill_midway(root: Path, outbox: Path, total: int) -> int:
    """Run ``hostcore export`` in a subprocess and SIGKILL it at about half; rows held."""
    shutil.rmtree(outbox, ignore_errors=True)
    (root / "cache" / "refs.json").unlink(missing_ok=True)
    env = {**os.environ, "HOSTCORE_ROOT": str(root),
           "HOSTCORE_LOAD_PLUGINS": "hostcore-directory-destination"}
    proc = subprocess.Popen([sys.executable, "-m", "hostcore", "export"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))
    while proc.poll() is None:
        size = sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))
        if size > target and held_lines(outbox) >= total // 2:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return held_lines(outbox)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved runs of each measurement (median, min, max)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to build the store and outbox (default: a temp dir)")
    args = parser.parse_args()
    rows = 100_000 if args.quick else args.rows
    work = Path(tempfile.mkdtemp(prefix="hostcore-export-bench-", dir=args.dir))
    root, outbox = work / "root", work / "outbox"
    root.mkdir()
    try:
        started = time.perf_counter()
        # In a child process, so the max RSS printed below is the export's own.
        builder = multiprocessing.get_context("spawn").Process(target=build_store,
                                                               args=(root, rows))
        builder.start()
        builder.join()
        configure(root, outbox)
        print(f"store: {rows:,} permitted rows built in {time.perf_counter() - started:.1f} s "
              f"({work})")
        host = open_host(root)
        try:
            # Interleaved runs: other load on the machine then slows each side alike
            # instead of skewing the ratio, which is taken per run.
            seam_runs, export_runs, unchecked_runs = [], [], []
            for _ in range(args.repeat):
                seam_runs.append(seam_rate(host))
                export_runs.append(export_rate(host, outbox))
                unchecked_runs.append(unchecked_export_s(host, outbox))
            check_ms = policy_check_ms(host)
            read = seam_runs[0][0]
            pushed, pushes, checks = export_runs[0][0], export_runs[0][3], export_runs[0][4]
            seam_rates = [count / wall for count, wall, _ in seam_runs]
            export_rates = [run[0] / run[1] for run in export_runs]
            walls = [e / r for e, r in zip(export_rates, seam_rates, strict=True)]
            cpus = [seam[2] / export[2] for seam, export in zip(seam_runs, export_runs,
                                                               strict=True)]
            print(f"seam read:   {read:>10,} rows, rows/s {spread(seam_rates, ',.0f')} "
                  f"over {args.repeat} interleaved runs")
            print(f"export:      {pushed:>10,} rows, rows/s {spread(export_rates, ',.0f')}   "
                  f"max RSS {max_rss_mib():.0f} MiB")
            met = statistics.median(walls) >= RATIO_TARGET
            print(f"export/seam: by wall {spread(walls, '.2f', 'x')}, by process CPU time "
                  f"(all threads) {spread(cpus, '.2f', 'x')} -> {'PASS' if met else 'MISS'} "
                  f"(target >= {RATIO_TARGET}x by wall, median run)")
            size = sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))
            segments = len(list(outbox.glob("main/*/*.jsonl")))
            print(f"             {segments} segment(s), {size / 2**20:.0f} MiB, batches of "
                  f"{BATCH_ROWS:,} rows")
            per_batch = [(export[1] - unchecked) / pushes * 1000
                         for export, unchecked in zip(export_runs, unchecked_runs, strict=True)]
            print(f"policy check: {checks / pushes:.1f} per batch (one per {FETCH_ROWS:,}-row "
                  f"chunk), {check_ms * 1000:.1f} us each alone = "
                  f"{checks / pushes * check_ms:.3f} ms per batch; the export with it minus "
                  f"without it, per batch: {spread(per_batch, '+.2f', ' ms')}")
        finally:
            host.close()

        held = kill_midway(root, outbox, rows)
        torn = any(not p.read_bytes().endswith(b"\n") for p in outbox.glob("main/*/*.jsonl"))
        host = open_host(root)
        try:
            destination = MeasuredDestination(outbox)
            started = time.perf_counter()
            summary = Exporter(host, destination).run()
            resume_s = time.perf_counter() - started
            first, *_ = destination.recoveries
            most = max(r.bytes_read for r in destination.recoveries)
        finally:
            host.close()
        reader = DirectoryDestination(outbox)
        positions = [row.position for origin in sorted(p.name for p in (outbox / "main").iterdir()
                                                        if p.is_dir())
                     for row in reader.read_rows("main", origin)]
        duplicates = len(positions) - len(set(positions))
        print(f"kill:        SIGKILL with {held:,} rows held (torn line: {torn})")
        print(f"resume:      pushed {summary.rows:,} rows in {resume_s:.2f} s; "
              f"held + pushed = {held + summary.rows:,} of {rows:,}; duplicates {duplicates}; "
              f"lost {rows - len(set(positions))}")
        print(f"recovery:    the resume's first push re-read {first.bytes_read:,} bytes "
              f"(any push at most {most:,}; one segment is {SEGMENT_BYTES:,}); cut "
              f"{first.torn_bytes} torn bytes, dropped {first.segments_dropped} empty segment(s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
