"""Benchmark: what ``hostcore hook`` costs an agent, per event.

Claude Code and Codex start ``hostcore hook`` once per hook event: on every tool
call (PreToolUse, PostToolUse), and at each session's start and end. Measured in
one run, the console script with every installed plugin, as ``hostcore hooks
install`` writes it, against a root whose plugin index is made (the first hook
after an install makes it):

* SessionStart and PostToolUse payloads, each against ``python -c pass`` launched
  in turns with it (goal: each ≤ 5x);
* Stop with a transcript of ``--transcript-mb`` MB (default 10) that is all new
  (goal: ≤ 1 s), and SessionEnd with the same (goal: always inside Claude Code's
  1.5 s for every SessionEnd hook together), each in a fresh root, with how many
  of the transcript's rows the hook stored (the rest is left to the next tick).

Times are the median, min and max of ``--runs`` launches; peak memory is each
child's own maximum resident set (``wait4``). A missed goal is printed as MISS,
never an exit status.

Usage: ``python benchmarks/hooks.py [--runs N] [--transcript-mb MB] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _figures import spread

TOOL_RATIO_GOAL = 5.0
STOP_GOAL_SECONDS = 1.0
SESSION_END_GOAL_SECONDS = 1.5
LINE_PAYLOAD = 900  # bytes of content per transcript line, about a real one's


def hostcore_command(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("hostcore")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "hostcore", *args]


def launch(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds of one launch and its peak resident set (KiB)."""
    took, _, peak = launch_timed(argv, stdin, env)
    return took, peak


def launch_timed(argv: list[str], stdin: bytes, env: dict[str, str]
                 ) -> tuple[float, float, int]:
    """Wall and CPU seconds (user + system) of one launch, and its peak resident set
    (KiB)."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
    assert child.stdin is not None
    child.stdin.write(stdin)
    child.stdin.close()
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {child.returncode}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def transcript(folder: Path, session: str, megabytes: float) -> tuple[Path, int]:
    """A Claude Code transcript of about ``megabytes`` MB, and its line count."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    lines = 0
    with path.open("w") as out:
        while out.tell() < megabytes * 1_000_000:
            out.write(json.dumps({"type": "assistant" if lines % 2 else "user",
                                  "cwd": "/work/project", "sessionId": session,
                                  "uuid": f"{session}-{lines}", "gitBranch": "main",
                                  "timestamp": "2026-01-01T00:00:00.000Z",
                                  "message": {"content": "x" * LINE_PAYLOAD}}) + "\n")
            lines += 1
    return path, lines


def payload(name: str, session: str, path: Path, **fields: object) -> bytes:
    return json.dumps({"hook_event_name": name, "session_id": session,
                       "cwd": "/work/project", "transcript_path": str(path),
                       "permission_mode": "default", **fields}).encode()


def stored_rows(root: Path, env: dict[str, str]) -> int:
    done = subprocess.run(hostcore_command("--root", str(root), "evidence", "--json"),
                          capture_output=True, text=True, env=env, check=True)
    rows: int = json.loads(done.stdout)["rows"]
    return rows


def describe(name: str, seconds: list[float], peak_kib: int) -> str:
    ms = [s * 1000 for s in seconds]
    return (f"{name:<24} median {statistics.median(ms):7.1f} ms  min {min(ms):7.1f}  "
            f"max {max(ms):7.1f}  peak {peak_kib / 1024:5.1f} MiB")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--transcript-mb", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true",
                        help="3 runs and a 1 MB transcript: that the script works")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    megabytes = 1.0 if args.quick else args.transcript_mb

    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp)
        claude = base / "home" / ".claude"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HOSTCORE_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(HOME=str(base / "home"), CLAUDE_CONFIG_DIR=str(claude))
        projects = claude / "projects" / "-work-project"
        small, _ = transcript(projects, "tools", 0.001)
        root = base / "root"
        hook = hostcore_command("--root", str(root), "hook", "--agent", "claude-code")
        tool_events = {
            "SessionStart": payload("SessionStart", "tools", small, source="startup"),
            "PostToolUse": payload("PostToolUse", "tools", small, tool_name="Bash",
                                   tool_use_id="toolu_1", tool_input={"command": "ls"},
                                   tool_response={"stdout": "a\nb\n", "stderr": ""}),
        }
        for data in tool_events.values():
            launch(hook, data, env)  # the plugin index and bytecode, made once
        baseline = [sys.executable, "-c", "pass"]
        times: dict[str, list[float]] = {"python -c pass": [], **{n: [] for n in tool_events}}
        cpu: dict[str, list[float]] = {name: [] for name in times}
        peaks: dict[str, int] = dict.fromkeys(times, 0)
        load_before = os.getloadavg()[0]
        for _ in range(runs):  # in turns: a burst of load hits every command alike
            for name in times:
                argv, data = (baseline, b"") if name == "python -c pass" else (
                    hook, tool_events[name])
                took, spent, peak = launch_timed(argv, data, env)
                times[name].append(took)
                cpu[name].append(spent)
                peaks[name] = max(peaks[name], peak)
        index = json.loads((root / "agents" / "plugin-index.json").read_text())
        print(f"hostcore hook, {runs} runs each; plugins the hook loads: "
              f"{', '.join(index['plugins']) or 'none'}; load average {load_before:.1f} "
              f"before, {os.getloadavg()[0]:.1f} after")
        print(describe("python -c pass", times["python -c pass"], peaks["python -c pass"]))
        for name in tool_events:
            # Each run's hook against the bare interpreter launched next to it; judged on
            # the median ratio by wall clock and by CPU time, which load moves least.
            wall = [h / b for h, b in zip(times[name], times["python -c pass"], strict=True)]
            used = [h / b for h, b in zip(cpu[name], cpu["python -c pass"], strict=True)
                    if b > 0]
            ok = statistics.median(wall) <= TOOL_RATIO_GOAL and (
                not used or statistics.median(used) <= TOOL_RATIO_GOAL)
            by_cpu = f"by CPU {spread(used, '.2f', 'x')}" if used else "by CPU -"
            print(f"{describe(name + ' hook', times[name], peaks[name])}\n"
                  f"{'':<24} by wall {spread(wall, '.2f', 'x')}; {by_cpu}  "
                  f"goal <= {TOOL_RATIO_GOAL:.0f}x  {verdict(ok)}")

        big, lines = transcript(projects, "big", megabytes)
        size = big.stat().st_size / 1_000_000
        for name, goal, fields in (("Stop", STOP_GOAL_SECONDS, {"stop_hook_active": False}),
                                   ("SessionEnd", SESSION_END_GOAL_SECONDS,
                                    {"reason": "other"})):
            seconds: list[float] = []
            peak = 0
            stored: list[int] = []
            for n in range(runs):
                fresh = base / f"root-{name}-{n}"
                argv = hostcore_command("--root", str(fresh), "hook", "--agent", "claude-code")
                launch(argv, tool_events["SessionStart"], env)  # its plugin index
                took, rss = launch(argv, payload(name, "big", big, **fields), env)
                seconds.append(took)
                peak = max(peak, rss)
                stored.append(stored_rows(fresh, env))
            worst = max(seconds)
            ok = (statistics.median(seconds) if name == "Stop" else worst) <= goal
            print(f"{describe(f'{name} {size:.1f} MB', seconds, peak)}  ratio to goal "
                  f"{(statistics.median(seconds) if name == 'Stop' else worst) / goal:4.2f}  "
                  f"goal {'median' if name == 'Stop' else 'max'} <= {goal} s  "
                  f"{verdict(ok)}  rows stored {min(stored)}-{max(stored)} of {lines}")


if __name__ == "__main__":
    main()
