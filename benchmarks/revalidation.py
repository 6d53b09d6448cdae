"""Benchmark: a revalidation pass of the github-capture inventory against a raw sqlite3 scan.

Builds two stores of agent sessions over 10,000 repositories: ``--rows``
(default 2,000,000) and a tenth of it. Both hold the same 10,000 sessions —
one per repository, each in its checkout directory (a fifth of the
repositories also in a second worktree), through one of six sources in three
partitions, with the remote written in https, scp or ssh form — so only the
rows per session differ. 10% of the checkout directories are local-only and one
source is opted out, so the seam withholds part of the history.

Then, in the same run:

* raw: ``SELECT position, git_remote FROM evidence WHERE part = ?`` for every
  partition, iterated with plain ``sqlite3`` (no policy, no reduction);
* pass: a whole revalidation pass of the sidecar (policy applied through the
  export seam, rows reduced to keys, progress persisted after every slice),
  its slices run back to back at the 50,000-row budget; ticks counted;
* peak Python memory (tracemalloc) of a whole pass on the small and the large
  store (target: within 10%);
* an ordinary tick with nothing changed (target: < 5 ms, zero rows read);
* a pass by tuples (the "go further" part): the same pass reading the
  distinct (directory, source, remote) tuples the store keeps, through
  ``ExportSeam.read_tuples_since_sync``, at 50,000 tuples a tick: ticks, time,
  and the check that it confirms the same repositories.

Usage: ``python benchmarks/revalidation.py [--rows N] [--quick]``
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostcore_github_capture.sidecar import (
    REVALIDATION_ROW_BUDGET,
    REVALIDATION_TUPLE_BUDGET,
    Sidecar,
)
from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

from hostcore.files import atomic_write
from hostcore.evidence.policy import Policy
from hostcore.evidence.inputs import (
    CLASS_LIST_FILE,
    OPT_OUT_FILE,
    ClassList,
    IgnoreDotfiles,
    SyncOptOut,
)
from hostcore.evidence.seam import ExportSeam
from hostcore.evidence.store import EvidenceRow, Store

REPOS = 10_000
SOURCES = [f"{tool}-{host}" for tool in ("claude", "codex", "gemini") for host in ("a", "b")]
WORKTREE_SHARE = 0.2
LOCAL_ONLY_SHARE = 0.10
APPEND_BATCH = 20_000
ORDINARY_TICKS = 1_000


def checkout(repo: int, worktree: bool = False) -> str:
    # Under a folder that does not exist, so the dotfile input finds no dotfile.
    return f"/nonexistent-bench/src/owner-{repo // 100}/repo-{repo}" + ("-wt" if worktree else "")


def remote(repo: int) -> str:
    owner, name = f"owner-{repo // 100}", f"repo-{repo}"
    return (f"https://github.com/{owner}/{name}.git", f"git@github.com:{owner}/{name}.git",
            f"ssh://git@github.com/{owner}/{name}")[repo % 3]


def sessions(total_rows: int, rng: random.Random) -> Iterator[EvidenceRow]:
    """One session per repository, in random order; ``total_rows`` rows in all."""
    order = list(range(REPOS))
    rng.shuffle(order)
    per_session, extra = divmod(total_rows, REPOS)
    for n, repo in enumerate(order):
        directory = checkout(repo, worktree=rng.random() < WORKTREE_SHARE)
        source = rng.choice(SOURCES)
        url = remote(repo)
        for i in range(per_session + (n < extra)):
            yield EvidenceRow(partition=source.split("-")[0], source_id=source,
                              session_id=f"s{n}", directory=directory,
                              # Some turns carry no remote (a tool call outside git, say).
                              git_remote="" if i % 20 == 19 else url)


def build(root: Path, total_rows: int) -> Store:
    rng = random.Random(11)
    store = Store(root / "store.sqlite3")
    batch: list[EvidenceRow] = []
    for row in sessions(total_rows, rng):
        batch.append(row)
        if len(batch) == APPEND_BATCH:
            store.append(batch)
            batch = []
    store.append(batch)
    policy_rng = random.Random(3)
    chosen = policy_rng.sample(range(REPOS), int(REPOS * LOCAL_ONLY_SHARE))
    local = sorted(checkout(repo) for repo in chosen)
    # The list's documented format, written once (ClassList.set rewrites it per entry).
    atomic_write(root / CLASS_LIST_FILE,
                 "".join(f"local-only\t{directory}\n" for directory in local).encode())
    SyncOptOut(root / OPT_OUT_FILE).set(SOURCES[-1], True)
    return store


def seam_for(store: Store, root: Path) -> ExportSeam:
    policy = Policy([ClassList(root / CLASS_LIST_FILE), SyncOptOut(root / OPT_OUT_FILE),
                     IgnoreDotfiles()])
    return ExportSeam(store, policy)


class Counting:
    """The seam, counting the rows it yields."""

    def __init__(self, seam: ExportSeam) -> None:
        self.seam = seam
        self.rows = 0

    def export_policy_fingerprint(self) -> str:
        return self.seam.export_policy_fingerprint()

    def read_rows_since_sync(self, partition: Any, cursor: int, columns: Any) -> Iterator[Any]:
        for row in self.seam.read_rows_since_sync(partition, cursor, columns):
            self.rows += 1
            yield row


def sidecar(store: Store, seam: Any, root: Path, **options: Any) -> Sidecar:
    state_path = root / "bench-state" / options.pop("state_name", SIDECAR_FILE)
    state_path.unlink(missing_ok=True)
    return Sidecar(store, seam, StateFile(state_path, SidecarState), lambda *a, **k: None,
                   **options)


def run_pass(side: Sidecar) -> tuple[int, float]:
    """Tick until the pass swaps; (ticks, seconds)."""
    started = time.perf_counter()
    ticks = 0
    while True:
        ticks += 1
        if side.tick().swapped:
            return ticks, time.perf_counter() - started


def time_raw(store: Store) -> tuple[int, float]:
    db = sqlite3.connect(store.path)
    parts = [row[0] for row in db.execute("SELECT id FROM partitions")]
    started = time.perf_counter()
    count = 0
    for part in parts:
        for _ in db.execute("SELECT position, git_remote FROM evidence WHERE part = ? "
                            "ORDER BY position", (part,)):
            count += 1
    elapsed = time.perf_counter() - started
    db.close()
    return count, elapsed


def pass_peak(store: Store, root: Path) -> int:
    side = sidecar(store, seam_for(store, root), root)
    tracemalloc.start()
    tracemalloc.reset_peak()
    run_pass(side)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def ordinary_tick_ms(store: Store, root: Path) -> tuple[float, float, int]:
    counting = Counting(seam_for(store, root))
    side = sidecar(store, counting, root)
    run_pass(side)
    counting.rows = 0
    samples = []
    for _ in range(ORDINARY_TICKS):
        started = time.perf_counter()
        side.tick()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, max(samples) * 1000, counting.rows


def _tuples(store: Store, root: Path) -> int:
    seam = seam_for(store, root)
    return sum(1 for part in store.partitions()
               for _ in seam.read_tuples_since_sync(part, 0, ["git_remote"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--quick", action="store_true", help="200,000 rows (a smoke run)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs; best is reported")
    args = parser.parse_args()
    total = 200_000 if args.quick else args.rows
    small_total = total // 10
    with tempfile.TemporaryDirectory(prefix="hostcore-bench-") as tmp:
        small_root, large_root = Path(tmp) / "small", Path(tmp) / "large"
        started = time.perf_counter()
        small = build(small_root, small_total)
        large = build(large_root, total)
        print(f"built {small_total:,} and {total:,} rows in "
              f"{time.perf_counter() - started:.1f} s", flush=True)

        counting = Counting(seam_for(large, large_root))
        raws, runs = [], []
        for _ in range(args.repeat):  # interleaved, so load on the machine hits both alike
            raws.append(time_raw(large))
            counting.rows = 0
            runs.append((*run_pass(sidecar(large, counting, large_root)), counting.rows))
        raw = min(raws, key=lambda r: r[1])
        ticks, seconds, permitted = min(runs, key=lambda r: r[1])
        repos = StateFile(large_root / "bench-state" / SIDECAR_FILE, SidecarState).load().repos
        tuple_runs = [run_pass(sidecar(large, seam_for(large, large_root), large_root,
                                       unit="tuples", state_name="tuples.json"))
                      for _ in range(args.repeat)]
        tuple_ticks, tuple_seconds = min(tuple_runs, key=lambda r: r[1])
        by_tuples = StateFile(large_root / "bench-state" / "tuples.json", SidecarState).load()
        same = by_tuples.repos == repos
        tuples_read = _tuples(large, large_root)
        peak_small = pass_peak(small, small_root)
        peak_large = pass_peak(large, large_root)
        tick_median, tick_max, tick_rows = ordinary_tick_ms(large, large_root)
        small.close()
        large.close()

    budget = REVALIDATION_ROW_BUDGET
    print(f"raw sqlite3 scan : {raw[0]:>10,} rows in {raw[1]:.3f} s")
    print(f"revalidation pass: {permitted:>10,} permitted rows of {total:,} in {seconds:.3f} s, "
          f"{len(repos):,} repositories confirmed")
    print(f"ratio pass/raw   : {seconds / raw[1]:.2f}x  (target within 2.5x)")
    print(f"ticks to converge at {budget:,} rows/tick: {ticks} "
          f"(permitted rows // budget + 1 = {permitted // budget + 1})")
    growth = peak_large / peak_small - 1
    print(f"peak memory of a pass: {peak_small / 1024:,.0f} KiB at {small_total:,} rows, "
          f"{peak_large / 1024:,.0f} KiB at {total:,} rows ({growth:+.1%}; target within 10%)")
    print(f"ordinary tick, nothing changed: median {tick_median:.3f} ms, max {tick_max:.3f} ms, "
          f"{tick_rows} rows read (target < 5 ms, 0 rows)")
    print(f"pass by tuples   : {tuples_read:>10,} permitted tuples in {tuple_seconds:.3f} s, "
          f"{tuple_ticks} tick(s) at {REVALIDATION_TUPLE_BUDGET:,} tuples/tick "
          f"(vs {ticks} by rows; {seconds / tuple_seconds:,.0f}x less time), "
          f"same repositories: {same}")


if __name__ == "__main__":
    main()
