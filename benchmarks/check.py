"""Benchmark: ``hostcore check`` over many stamped files.

A repository of N files (10,000 by default) in N/10 folders (1,000), two levels
deep, with a ``CLAUDE.md`` at the top and in every tenth folder; every file
stamped (setup, timed once for information). Measured, over ``--repeat``
interleaved runs (default 5), as the median, min and max wall time:

* ``hostcore check --json`` as a process in the repository (every stamped target
  of it), against the goal of 1 s;
* ``python -c pass`` (the interpreter's start, the floor of any command) and a
  raw pass over the same files: one ``stat`` per target and one read of the
  instruction files of each folder on their paths, what the check cannot do
  without; each printed as the check's ratio to it.

The check's CPU time (user and system) is printed too: on a loaded machine it
moves far less than the wall time. Then the check once more after one folder's
``CLAUDE.md`` changed (its targets go stale), and the peak memory of the check
processes (largest child RSS), and the load average before and after the runs
(figures from a loaded machine are read against it).

Usage: ``python benchmarks/check.py [--files N] [--repeat R] [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _figures import spread

from hostcore.governance import stamp_targets
from hostcore.host import Host

GOAL_SECONDS = 1.0
FILES_PER_FOLDER = 10
FOLDERS_PER_GROUP = 10


def plant(repo: Path, files: int) -> list[Path]:
    """The repository's folders and files (setup only, not measured)."""
    (repo / ".git").mkdir(parents=True)
    (repo / "CLAUDE.md").write_text("use tabs\n")
    targets = []
    for n in range(max(1, files // FILES_PER_FOLDER)):
        folder = repo / f"group{n // FOLDERS_PER_GROUP}" / f"pkg{n}"
        folder.mkdir(parents=True)
        if n % 10 == 0:
            (folder / "CLAUDE.md").write_text(f"rules of pkg{n}\n")
        for f in range(FILES_PER_FOLDER):
            path = folder / f"m{f}.py"
            path.write_text(f"value = {f}\n")
            targets.append(path)
    return targets


def env() -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    found["HOSTCORE_LOAD_PLUGINS"] = ""  # the built-in inputs only
    return found


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_check(root: Path, repo: Path) -> tuple[float, float, dict[str, int]]:
    """Wall and CPU seconds of one ``hostcore check --json``, and its statuses."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "check",
                           "--json"], cwd=repo, env=env(), capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    cpu = children_cpu() - cpu
    if done.returncode not in (0, 1):
        raise SystemExit(f"hostcore check failed ({done.returncode}): {done.stderr[-2000:]}")
    statuses: dict[str, int] = {}
    for target in json.loads(done.stdout)["targets"]:
        statuses[target["status"]] = statuses.get(target["status"], 0) + 1
    return wall, cpu, statuses


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def raw_pass(repo: Path, targets: list[Path]) -> float:
    """A stat per target and one read of the instruction files of each folder on the
    targets' paths (the root, each group, each package), each folder once."""
    started = time.perf_counter()
    folders: set[Path] = {repo}
    for path in targets:
        os.stat(path)
        folders.update((path.parent, path.parent.parent))
    for folder in folders:
        for name in ("CLAUDE.md", "AGENTS.md"):
            with contextlib.suppress(FileNotFoundError):
                (folder / name).read_bytes()
    return time.perf_counter() - started



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 files, 3 runs")
    parser.add_argument("--repeat", type=int, default=5,
                        help="interleaved runs (median, min, max)")
    args = parser.parse_args(argv)
    files = 1_000 if args.quick else args.files
    repeat = 3 if args.quick else max(5, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        repo, root = Path(tmp) / "repo", Path(tmp) / "state"
        targets = plant(repo, files)
        folders = len({t.parent for t in targets})
        started = time.perf_counter()
        with Host(root=root, load_entrypoints=False, env={}) as host:
            stamp_targets(host, targets)
        stamp_seconds = time.perf_counter() - started
        print(f"hostcore check: {len(targets):,} stamped files in {folders:,} folders "
              f"(stamping them all in-process: {stamp_seconds:.2f} s)")
        load_before = os.getloadavg()[0]
        checks, cpus, floors, raws = [], [], [], []
        statuses: dict[str, int] = {}
        for _ in range(repeat):
            floors.append(python_pass())
            raws.append(raw_pass(repo, targets))
            wall, cpu, statuses = run_check(root, repo)
            checks.append(wall)
            cpus.append(cpu)
        median = statistics.median(checks)
        verdict = "PASS" if median <= GOAL_SECONDS else "MISS"
        print(f"  check --json            {spread(checks, unit=' s')}  "
              f"goal <= {GOAL_SECONDS:.0f} s: "
              f"{verdict}  ({', '.join(f'{n:,} {s}' for s, n in sorted(statuses.items()))})")
        # CPU time is what a loaded machine changes least: wall time waits its turn.
        print(f"  check --json, CPU       {spread(cpus, unit=' s')}")
        print(f"  python -c pass          {spread(floors, unit=' s')}  ratio "
              f"{median / statistics.median(floors):.1f}x")
        print(f"  raw stat + reads        {spread(raws, unit=' s')}  ratio "
              f"{median / statistics.median(raws):.1f}x")
        (repo / "group0" / "pkg0" / "CLAUDE.md").write_text("rules of pkg0, changed\n")
        wall, _, statuses = run_check(root, repo)
        print(f"  after one folder's CLAUDE.md changed: {wall:.3f} s "
              f"({statuses.get('stale', 0):,} stale)")
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"  peak memory of a check process: {peak_kib / 1024:.1f} MiB")
        print(f"  load average (1 min) before and after the runs: {load_before:.1f}, "
              f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
