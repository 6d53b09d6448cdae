"""Benchmark: the export seam against a raw sqlite3 iteration of the same rows.

Builds a store of ``--rows`` evidence rows (default 2,000,000) over 10,000 git
remotes, 500 directories and 50 sources, with a policy that withholds 10% of the
directories (class-per-entry list) and 2 sources (sync opt-out). Then, in the
same run:

* raw: ``SELECT position, git_remote FROM evidence ORDER BY position`` iterated
  with plain ``sqlite3`` (no policy, every row);
* seam: ``async for row in seam.read_rows_since(None, 0, ["git_remote"])`` over
  the whole history (policy applied);

and prints their rates in history rows per second (rows covered / seconds) and
the ratio seam/raw (target: >= 0.5), by wall clock and by this process's CPU
time (the CPU ratio is the steadier one on a busy machine). ``--repeat`` rounds
(default 5) interleave the readers; each round's ratio is printed as the median, min
and max over the rounds, with PASS/MISS for each target (the median round). Peak
Python memory (tracemalloc) of a seam read is measured when the store holds 10%
of the rows and again when it holds all of them (target: within 10%).
``export_policy_fingerprint()`` is timed with an unchanged policy (target: < 1 ms).
The ignore-dotfiles input's fingerprint part is timed when it looks at its folders
again (what it does at most every ``IGNORE_TTL_SECONDS``) with 1,000 real directories
known (target: <= 5 ms).

Usage: ``python benchmarks/export_seam.py [--rows N] [--repeat R] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from _figures import spread

from hostcore.evidence.inputs import (
    CLASS_LIST_FILE,
    IGNORE_FILE_NAME,
    OPT_OUT_FILE,
    ClassList,
    IgnoreDotfiles,
    SyncOptOut,
)
from hostcore.evidence.policy import Policy
from hostcore.evidence.seam import ExportSeam
from hostcore.evidence.store import EvidenceRow, Store

REMOTES = 10_000
DIRECTORIES = 500
SOURCES = 50
PARTITIONS = 4
WITHHELD_DIRECTORY_SHARE = 0.10
OPTED_OUT_SOURCES = 2
APPEND_BATCH = 20_000
FINGERPRINT_CALLS = 2_000
DOTFILE_DIRECTORIES = 1_000
DOTFILE_CALLS = 200
COLUMNS = ["git_remote"]
RATIO_TARGET = 0.5


def directory(i: int) -> str:
    # Under a folder that does not exist, so the dotfile input finds no dotfile.
    return f"/nonexistent-bench/work/project-{i:03d}"


def fill(store: Store, start: int, stop: int, rng: random.Random) -> None:
    """Append rows ``start..stop`` in batches (positions follow append order)."""
    for batch_start in range(start, stop, APPEND_BATCH):
        rows = []
        for i in range(batch_start, min(stop, batch_start + APPEND_BATCH)):
            source = rng.randrange(SOURCES)
            rows.append(EvidenceRow(
                partition=f"part-{source % PARTITIONS}",
                source_id=f"source-{source:02d}",
                session_id=f"session-{i // 500}",
                ts="2026-01-01T00:00:00Z",
                directory=directory(rng.randrange(DIRECTORIES)),
                git_remote=f"git@github.com:owner-{rng.randrange(REMOTES)}/repo.git",
                payload={"type": "user"},
            ))
        store.append(rows)


def write_policy(root: Path, rng: random.Random) -> None:
    class_list = ClassList(root / CLASS_LIST_FILE)
    for i in rng.sample(range(DIRECTORIES), int(DIRECTORIES * WITHHELD_DIRECTORY_SHARE)):
        class_list.set(directory(i), "local-only")
    opt_out = SyncOptOut(root / OPT_OUT_FILE)
    for i in rng.sample(range(SOURCES), OPTED_OUT_SOURCES):
        opt_out.set(f"source-{i:02d}", True)


def fresh_seam(store: Store, root: Path) -> ExportSeam:
    """A seam and policy with cold caches, as a newly started host has."""
    policy = Policy([ClassList(root / CLASS_LIST_FILE), SyncOptOut(root / OPT_OUT_FILE),
                     IgnoreDotfiles()])
    return ExportSeam(store, policy)


class Timing:
    """Wall-clock and CPU time of each run of one reader."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.count = 0

    def run(self, reader: Callable[[], int]) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.count = reader()
        self.walls.append(time.perf_counter() - wall)
        self.cpus.append(time.process_time() - cpu)



def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def read_raw(path: Path) -> int:
    db = sqlite3.connect(path)
    count = 0
    for _ in db.execute("SELECT position, git_remote FROM evidence ORDER BY position"):
        count += 1
    db.close()
    return count


async def _drain(seam: ExportSeam) -> int:
    count = 0
    async for _ in seam.read_rows_since(None, 0, COLUMNS):
        count += 1
    return count


def read_seam(seam: ExportSeam) -> int:
    return asyncio.run(_drain(seam))


def read_seam_sync(seam: ExportSeam) -> int:
    count = 0
    for _ in seam.read_rows_since_sync(None, 0, COLUMNS):
        count += 1
    return count


def peak_memory(seam: ExportSeam) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    asyncio.run(_drain(seam))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def fingerprint_ms(seam: ExportSeam) -> tuple[float, float, float]:
    seam.export_policy_fingerprint()
    samples = []
    for _ in range(FINGERPRINT_CALLS):
        started = time.perf_counter()
        seam.export_policy_fingerprint()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return (statistics.median(samples) * 1000, samples[int(len(samples) * 0.99)] * 1000,
            samples[-1] * 1000)


def dotfile_part_ms(parent: Path) -> tuple[int, list[float], list[float]]:
    """(folders looked at, wall ms of each call, CPU ms of each call) of a full
    re-check of the dotfile part.

    DOTFILE_DIRECTORIES real project folders, 50 per owner folder, one owner
    folder holding a ``.hostcoreignore``; every one asked about once, as a seam
    read asks about each scope's directory. ``ttl=0`` makes every call look at
    every known folder (each asked directory and its ancestors) again: one
    ``lstat`` each, so CPU time (which counts the system calls) is the steadier
    figure on a busy machine.
    """
    dotfiles = IgnoreDotfiles(ttl=0)
    folders: set[Path] = set()
    for i in range(DOTFILE_DIRECTORIES):
        folder = parent / f"owner-{i // 50:02d}" / f"project-{i:04d}"
        folder.mkdir(parents=True)
        dotfiles.withholds(str(folder), "source-00")
        folders.update((folder, *folder.parents))
    (parent / "owner-03" / IGNORE_FILE_NAME).touch()
    dotfiles.fingerprint_part()
    wall, cpu = [], []
    for _ in range(DOTFILE_CALLS):
        started, used = time.perf_counter(), time.process_time()
        dotfiles.fingerprint_part()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return len(folders), [w * 1000 for w in wall], [c * 1000 for c in cpu]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows (a smoke run)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved timed rounds (median, min, max)")
    args = parser.parse_args()
    total = 100_000 if args.quick else args.rows
    small = total // 10
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="hostcore-bench-") as tmp:
        root = Path(tmp)
        store = Store(root / "store.sqlite3")
        write_policy(root, rng)

        started = time.perf_counter()
        fill(store, 0, small, rng)
        peak_small = peak_memory(fresh_seam(store, root))
        fill(store, small, total, rng)
        built = time.perf_counter() - started
        print(f"built {total:,} rows in {built:.1f} s", flush=True)
        peak_large = peak_memory(fresh_seam(store, root))
        seam = fresh_seam(store, root)

        raw, seam_async, seam_sync = Timing(), Timing(), Timing()
        # Interleaved rounds: other load on the machine hits all three alike.
        for _ in range(args.repeat):
            raw.run(lambda: read_raw(store.path))
            seam_async.run(lambda: read_seam(seam))
            seam_sync.run(lambda: read_seam_sync(seam))
        fp_median, fp_p99, fp_max = fingerprint_ms(seam)
        store.close()
        folders, dot_wall, dot_cpu = dotfile_part_ms(root / "dotfile-tree")

    print(f"{args.repeat} interleaved rounds; each ratio is raw's time over the reader's in "
          "the same round")
    print(f"{'reader':<13} {'rows out':>10} {'median wall s':>13} {'median cpu s':>12} "
          f"{'history rows/s':>15}")
    for name, timing in (("raw sqlite3", raw), ("seam async", seam_async),
                         ("seam sync", seam_sync)):
        wall = statistics.median(timing.walls)
        print(f"{name:<13} {timing.count:>10,} {wall:>13.3f} "
              f"{statistics.median(timing.cpus):>12.3f} {total / wall:>15,.0f}")
    for name, timing in (("seam async", seam_async), ("seam sync", seam_sync)):
        walls = [r / t for r, t in zip(raw.walls, timing.walls, strict=True)]
        cpus = [r / t for r, t in zip(raw.cpus, timing.cpus, strict=True)]
        line = (f"{name} / raw: by wall {spread(walls, '.2f', 'x')}, by CPU "
                f"{spread(cpus, '.2f', 'x')}")
        if name == "seam async":
            line += (f" -> {verdict(statistics.median(walls) >= RATIO_TARGET)} (target >= "
                     f"{RATIO_TARGET:.2f}x by wall, median round; rows/s over the whole "
                     "history)")
        print(line)
    growth = peak_large / peak_small - 1
    print(f"peak memory of a seam read: {peak_small / 1024:,.0f} KiB at {small:,} rows, "
          f"{peak_large / 1024:,.0f} KiB at {total:,} rows ({growth:+.1%}) -> "
          f"{verdict(growth <= 0.10)} (target within 10%)")
    print(f"export_policy_fingerprint() over {FINGERPRINT_CALLS:,} calls: median "
          f"{fp_median:.3f} ms, p99 {fp_p99:.3f} ms, max {fp_max:.3f} ms -> "
          f"{verdict(fp_median < 1)} (target < 1 ms, median)")
    print(f"ignore-dotfiles part, re-checked with {DOTFILE_DIRECTORIES:,} directories known "
          f"({folders:,} folders looked at), over {DOTFILE_CALLS} calls: wall "
          f"{spread(dot_wall, '.2f', ' ms')}, CPU {spread(dot_cpu, '.2f', ' ms')} -> "
          f"{verdict(statistics.median(dot_wall) <= 5)} (target <= 5 ms, median)")


if __name__ == "__main__":
    main()
