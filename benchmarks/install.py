"""Benchmark: installing ``hostcore[all]`` from the offline wheelhouse, and its size.

Measured in one run:

* ``scripts/build-dist`` building the wheelhouse (seconds);
* the wheelhouse: its size, split into this tree's wheels and sdists and the
  third-party wheels, and how many files;
* ``pip install --no-index --find-links WHEELHOUSE "hostcore[all]"`` into a fresh
  venv, as a user runs it, against a raw baseline measured in the same run: the very
  same wheels installed as files with ``--no-deps`` into another fresh venv, which is
  unpacking alone, with no resolution. The ratio is what resolving the extras and
  reading the wheelhouse add;
* the peak RSS of any child process (pip, the build).

There is no target: the figures are recorded in docs/releasing.md so that growth is
visible. ``--quick`` builds without the dependency wheels and installs only this
tree's wheels (by name with ``--no-deps`` against the same files), once each.

Usage: ``python benchmarks/install.py [--runs N] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def first_party_names() -> list[str]:
    """hostcore and every plugins/ and contrib/ distribution, as wheel file prefixes."""
    folders = [REPO, *sorted(p.parent for family in ("plugins", "contrib")
                             for p in (REPO / family).glob("*/pyproject.toml"))]
    return [tomllib.loads((f / "pyproject.toml").read_text("utf-8"))["project"]["name"]
            for f in folders]


def pip_env() -> dict[str, str]:
    """No pip configuration, no index: only the wheelhouse is looked at."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds ``command`` took; it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"install benchmark: {command[:4]} failed:\n{result.stderr[-2000:]}")
    return seconds


def fresh_venv(folder: Path) -> Path:
    """A new venv without pip (this interpreter's pip installs into it)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=300)
    return folder / "bin" / "python"


def install_seconds(wheelhouse: Path, work: Path, quick: bool, runs: int
                    ) -> tuple[float, float]:
    """Median seconds of the user's install and of the raw baseline, taken in turns."""
    ours = sorted(p for p in wheelhouse.glob("*.whl")
                  if p.name.split("-")[0] in {n.replace("-", "_") for n in first_party_names()})
    wheels = ours if quick else sorted(wheelhouse.glob("*.whl"))
    pip = [sys.executable, "-m", "pip"]
    source = ["--no-index", "--find-links", str(wheelhouse)]
    wanted = ["--no-deps", *first_party_names()] if quick else ["hostcore[all]"]
    user, raw = [], []
    for n in range(runs):
        python = fresh_venv(work / f"user-{n}")
        user.append(timed([*pip, "--python", str(python), "install", "-q", *source, *wanted],
                          pip_env()))
        python = fresh_venv(work / f"raw-{n}")
        raw.append(timed([*pip, "--python", str(python), "install", "-q", "--no-index",
                          "--no-deps", *map(str, wheels)], pip_env()))
    return statistics.median(user), statistics.median(raw)


def sizes(wheelhouse: Path) -> tuple[int, int, int]:
    """Bytes of this tree's artifacts, bytes of the other wheels, number of files."""
    prefixes = tuple(n.replace("-", "_") + "-" for n in first_party_names())
    files = [p for p in wheelhouse.iterdir() if p.is_file() and not p.name.startswith(".")]
    ours = sum(p.stat().st_size for p in files if p.name.startswith(prefixes))
    return ours, sum(p.stat().st_size for p in files) - ours, len(files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="installs of each kind")
    parser.add_argument("--quick", action="store_true",
                        help="no dependency wheels, this tree's wheels only, one run")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    with tempfile.TemporaryDirectory(prefix="hostcore-install-bench-") as scratch:
        work = Path(scratch)
        wheelhouse = work / "wheelhouse"
        build = [sys.executable, str(REPO / "scripts" / "build-dist"), "--out", str(wheelhouse)]
        build_seconds = timed(build + (["--no-deps"] if args.quick else []))
        ours, theirs, count = sizes(wheelhouse)
        user, raw = install_seconds(wheelhouse, work, args.quick, runs)
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    what = "ours, --no-deps" if args.quick else "hostcore[all]"
    print(f"build-dist                     {build_seconds:7.2f} s")
    print(f"wheelhouse                     {(ours + theirs) / 1e6:7.2f} MB in {count} files "
          f"({ours / 1e6:.2f} MB ours, {theirs / 1e6:.2f} MB third-party)")
    print(f"raw: the wheels as files       {raw:7.2f} s  (median of {runs}, --no-deps)")
    print(f"{'install ' + what:30} {user:7.2f} s  ratio {user / raw:5.2f}")
    print(f"peak child RSS                 {rss_kib / 1024:7.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
