"""Benchmark: what hostcore costs at startup, and what its hook dispatch costs.

Coding agents call hostcore as a process on every session event, so each of these
milliseconds is paid many times a day. Measured in one run, each against a raw
baseline measured in the same run (``python -c pass``):

* ``import hostcore`` in a fresh interpreter, and the import's own time measured
  inside that interpreter (target: adds under 30 ms);
* ``hostcore plugins --json``, ``hostcore status --json`` and ``hostcore run
  --once`` on an empty root with every installed plugin (target: each ≤ 8x); the
  last two take the lean path without click (``hostcore.cli.lean``), and ``run
  --once`` is also timed through click for comparison (no target);
* building a ``Host`` with every installed plugin, timed inside the interpreter
  that builds it (target: ≤ 60 ms);
* ``hostcore --version`` as a process (the console script beside this
  interpreter; target: ≤ 2.5x);
* calling a hook through ``host.hook`` against the same call through a bare
  ``pluggy.PluginManager`` with the same number of implementations
  (target: within 1.5x).

Process times are the median, min and max of ``--runs`` launches, taken in turns,
by wall clock and by the CPU time each launch used (user + system, from
``resource``); a ratio is of medians, and the targets are judged by CPU time: on
a shared machine a launch also waits for a CPU, and the load average (printed
before and after) says how much. Peak memory is the largest child RSS and the
Python peak of an in-process Host build (``tracemalloc``). A missed target is
printed, never an exit status.

Usage: ``python benchmarks/startup.py [--runs N] [--quick]``
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
import timeit
import tracemalloc
from pathlib import Path

from _figures import spread

IMPORT_BUDGET_MS = 30.0
VERSION_RATIO_BUDGET = 2.5
COMMAND_RATIO_BUDGET = 8.0
BUILD_BUDGET_MS = 60.0
DISPATCH_RATIO_BUDGET = 1.5
HOOK_IMPLEMENTATIONS = 3


def children_cpu_ms() -> float:
    """CPU time (user + system) of every child waited for so far, in milliseconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def process_ms(commands: dict[str, list[str]], runs: int, env: dict[str, str]
               ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU times of ``runs`` launches of each command, in milliseconds.

    The commands take turns, so a burst of load on the machine hits all of them
    alike instead of skewing one.
    """
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            used, start = children_cpu_ms(), time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env)
            wall[name].append((time.perf_counter() - start) * 1000)
            cpu[name].append(children_cpu_ms() - used)
    return wall, cpu


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def import_ms(runs: int, env: dict[str, str]) -> float:
    """Median time ``import hostcore`` itself takes in a fresh interpreter, in ms."""
    code = ("import time; t = time.perf_counter(); import hostcore; "
            "print((time.perf_counter() - t) * 1000)")
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env=env).stdout)
        for _ in range(runs)
    )


def build_ms(runs: int, root: str, env: dict[str, str]) -> float:
    """Median time of ``Host(...)`` with every installed plugin, inside a fresh
    interpreter that has already imported hostcore's CLI (as a command has)."""
    code = ("import time, hostcore.cli.app; from hostcore import Host; "
            f"t = time.perf_counter(); h = Host(root={root!r}); "
            "print((time.perf_counter() - t) * 1000); h.close()")
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env=env).stdout.splitlines()[-1])
        for _ in range(runs)
    )


def hostcore_command(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("hostcore")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "hostcore", *args]


def dispatch_ratio(calls: int) -> tuple[float, float]:
    """Seconds per call through a Host's hook relay and through bare pluggy."""
    import pluggy

    from hostcore import Host, hookimpl

    def make_impl(i: int) -> object:
        class Listener:
            __name__ = f"listener-{i}"

            @hookimpl
            def hostcore_work_item_event(self, event: object, host: object) -> None:
                return None

        return Listener()

    with tempfile.TemporaryDirectory() as root:
        host = Host(root=root, plugins=[make_impl(i) for i in range(HOOK_IMPLEMENTATIONS)],
                    load_entrypoints=False, env={})
        hook = host.hook.hostcore_work_item_event
        host_time = min(timeit.repeat(lambda: hook(event=None, host=host),
                                      number=calls, repeat=5)) / calls
        host.close()

    spec = pluggy.HookspecMarker("bench")
    impl = pluggy.HookimplMarker("bench")

    class Spec:
        @spec
        def bench_event(self, event: object, host: object) -> None:
            """The same shape as hostcore_work_item_event."""

    def make_raw(i: int) -> object:
        class Raw:
            @impl
            def bench_event(self, event: object, host: object) -> None:
                return None

        return Raw()

    pm = pluggy.PluginManager("bench")
    pm.add_hookspecs(Spec)
    for i in range(HOOK_IMPLEMENTATIONS):
        pm.register(make_raw(i), name=f"raw-{i}")
    raw_hook = pm.hook.bench_event
    raw_time = min(timeit.repeat(lambda: raw_hook(event=None, host=None),
                                 number=calls, repeat=5)) / calls
    return host_time, raw_time


def host_build_memory() -> tuple[float, dict[str, int]]:
    """Python peak (KiB) of one in-process Host build, and its plugins by status."""
    from hostcore import Host

    with tempfile.TemporaryDirectory() as root:
        tracemalloc.start()
        host = Host(root=root, load_entrypoints=True, env={})
        peak = tracemalloc.get_traced_memory()[1] / 1024
        tracemalloc.stop()
        statuses: dict[str, int] = {}
        for info in host.plugins.infos.values():
            statuses[info.status] = statuses.get(info.status, 0) + 1
        loaded = sorted(i.name for i in host.plugins.infos.values() if i.status == "loaded")
        host.close()
    statuses["names"] = loaded  # type: ignore[assignment]
    return peak, statuses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="launches per process timing")
    parser.add_argument("--quick", action="store_true", help="5 launches, fewer calls")
    args = parser.parse_args()
    runs = 5 if args.quick else args.runs
    calls = 20_000 if args.quick else 200_000
    # Bytecode is written and reused, as on a user's machine: without it every
    # launch would compile every module and measure the compiler instead.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HOSTCORE_") and k != "PYTHONDONTWRITEBYTECODE"}

    with tempfile.TemporaryDirectory() as tmp:
        root = str(Path(tmp) / "root")  # created 0700 by the first command that writes
        py = sys.executable
        commands = {
            "pass": [py, "-c", "pass"],
            "import": [py, "-c", "import hostcore"],
            "version": hostcore_command("--version"),
            "plugins --json": hostcore_command("--root", root, "plugins", "--json"),
            "status --json": hostcore_command("--root", root, "status", "--json"),
            "run --once": hostcore_command("--root", root, "run", "--once"),
            # The same through click: `--color auto` is the default, and the lean path
            # (hostcore.cli.lean) leaves every option of the terminal's to click.
            "run --once (click)": hostcore_command("--root", root, "--color", "auto", "run",
                                                   "--once"),
        }
        load_before = load_average()
        process_ms(commands, 1, env)  # warm the OS file cache
        launches, cpu_launches = process_ms(commands, runs, env)
        load_after = load_average()
        timed = {name: statistics.median(values) for name, values in launches.items()}
        cpu = {name: statistics.median(values) for name, values in cpu_launches.items()}
        import_itself = import_ms(runs, env)
        build = build_ms(runs, root, env)
    child_rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    baseline, cpu_baseline = timed["pass"], cpu["pass"]

    host_call, raw_call = dispatch_ratio(calls)
    peak_kib, statuses = host_build_memory()

    import_added = cpu["import"] - cpu_baseline
    version_ratio = cpu["version"] / cpu_baseline
    dispatch = host_call / raw_call
    results = [
        ("import hostcore adds (ms CPU)", import_added, IMPORT_BUDGET_MS, "<"),
        ("hostcore --version / python -c pass (CPU)", version_ratio, VERSION_RATIO_BUDGET,
         "<="),
        *((f"hostcore {name} / python -c pass (CPU)", cpu[name] / cpu_baseline,
           COMMAND_RATIO_BUDGET, "<=") for name in ("plugins --json", "status --json",
                                                    "run --once")),
        ("Host(...) with every plugin (ms)", build, BUILD_BUDGET_MS, "<="),
        ("host.hook dispatch / bare pluggy", dispatch, DISPATCH_RATIO_BUDGET, "<="),
    ]

    print(f"load average before {load_before}, after {load_after}; {runs} launches each; "
          "ratios of medians to python -c pass")

    def launch_line(label: str, name: str) -> None:
        ratios = "" if name == "pass" else (f"  ratio {cpu[name] / cpu_baseline:5.2f} CPU, "
                                            f"{timed[name] / baseline:5.2f} wall")
        print(f"{label:28} CPU {spread(cpu_launches[name], '.1f', ' ms')}\n"
              f"{'':28} wall {spread(launches[name], '.1f', ' ms')}{ratios}")

    launch_line("python -c pass", "pass")
    launch_line("python -c 'import hostcore'", "import")
    print(f"{'':28} (the import itself: {import_itself:.1f} ms)")
    for name in ("plugins --json", "status --json", "run --once", "run --once (click)"):
        launch_line(f"hostcore {name}", name)
    print(f"Host(...) with all plugins   {build:8.1f} ms  (in-process)")
    launch_line("hostcore --version", "version")
    print(f"  plugins in that Host: {statuses.pop('names')} {statuses}")
    print(f"hook call via host.hook      {host_call * 1e6:8.2f} us "
          f"({HOOK_IMPLEMENTATIONS} implementations)")
    print(f"hook call via bare pluggy    {raw_call * 1e6:8.2f} us")
    print(f"peak child RSS               {child_rss_kib / 1024:8.1f} MiB")
    print(f"peak Python memory, Host()   {peak_kib / 1024:8.2f} MiB (tracemalloc)")
    missed = 0
    for label, value, budget, op in results:
        ok = value < budget if op == "<" else value <= budget
        missed += not ok
        print(f"{'PASS' if ok else 'MISS'}  {label}: {value:.2f} (target {op} {budget})")
    print("targets met" if not missed else f"{missed} target(s) missed")
    return 0  # a missed target is reported above; only a crash exits non-zero


if __name__ == "__main__":
    raise SystemExit(main())
