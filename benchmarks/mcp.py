"""Benchmark: what ``hostcore mcp`` costs an agent, to connect and per ``work_items`` call.

An agent starts ``hostcore mcp`` as a stdio server (every installed plugin, as a
user's install has them) and speaks JSON-RPC to it. Measured in one run, each
over ``--runs`` launches or calls (median, min and max), with the server's own
peak resident set (``wait4``):

* connect + initialize: from launching the server to its answer to
  ``initialize``, against ``python -c pass`` launched in turns with it
  (goal: ≤ 10x), and, for scale, importing the MCP SDK's server alone and
  the time to the answer to a ``tools/list`` sent right after (which waits
  for the SDK: the stdio transport answers ``initialize`` before it loads);
* a ``work_items`` call on a ledger of ``--records`` records (default 100,000,
  a tenth of them in the repository asked about, a seventh labelled ``bug``,
  every other one a pull request), over the open session, as the client sees
  it (goal: ≤ 50 ms), by repository, for all, by label and by kind, label and
  repository together, after one first call that builds the host (reported on
  its own).

A missed goal is printed as MISS, never an exit status.

Usage: ``python benchmarks/mcp.py [--records N] [--runs N] [--quick]``
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
from typing import Any

from _figures import spread

from hostcore.timestamps import format_utc, utc_now
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord, encode_record

CONNECT_RATIO_GOAL = 10.0
CALL_GOAL_MS = 50.0
REPOSITORIES = 10
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "benchmark", "version": "0"}}}


def plant(root: Path, count: int) -> None:
    """``count`` poll-only records over REPOSITORIES repositories, indexed once."""
    ledger = Ledger(root / "ledger")
    ledger.portable.mkdir(parents=True, exist_ok=True)
    seen = format_utc(utc_now())
    for n in range(count):
        record = PortableRecord(ref=f"o{n % REPOSITORIES}/repo#{n}", poll=PollSection(
            last_polled_at=seen, updated_at="2026-11-01T00:00:00Z",
            kind="pull_request" if n % 2 else "issue",
            labels=["agent", "bug"] if n % 7 == 0 else ["agent"]))
        ledger.path_for(record.ref).write_bytes(encode_record(record))
    ledger.rebuild_index()
    ledger.close()


class Server:
    """``hostcore --root ROOT mcp`` over pipes, spoken to one JSON-RPC line at a time."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hostcore", "--root", str(root), "mcp"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "HOSTCORE_ROOT": str(root)})
        self.next_id = 1

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, wanted: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit("hostcore mcp ended without answering")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == wanted:
                if "error" in message:
                    raise SystemExit(f"hostcore mcp refused: {message['error']}")
                return message

    def initialize(self) -> None:
        self.send(INITIALIZE)
        self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def list_tools(self) -> None:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/list"})
        self.answer(self.next_id)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})
        result: dict[str, Any] = self.answer(self.next_id)["result"]
        return result

    def close(self) -> int:
        """End the session; the server's peak resident set (KiB)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        _, _, usage = os.wait4(self.process.pid, 0)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return int(usage.ru_maxrss)


def bare_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def sdk_import() -> float:
    """Importing the MCP SDK's server alone: the floor under any server built on it."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True)
    return time.perf_counter() - started


def connect(root: Path) -> tuple[float, float, int]:
    """Launch to the initialize answer, and launch to a tools/list answer after it."""
    started = time.perf_counter()
    server = Server(root)
    server.initialize()
    took = time.perf_counter() - started
    server.list_tools()
    listed = time.perf_counter() - started
    return took, listed, server.close()


def timings(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    """``values`` (seconds) as median, min and max in ``unit``, and how many runs."""
    return f"{spread([v * scale for v in values], '.3f', ' ' + unit)}, {len(values)} runs"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="a small ledger and 5 runs: checks the script works")
    args = parser.parse_args(argv)
    records, runs = (2_000, 5) if args.quick else (args.records, max(args.runs, 5))

    with tempfile.TemporaryDirectory(prefix="hostcore-mcp-bench-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir(mode=0o700)
        started = time.perf_counter()
        plant(root, records)
        print(f"ledger: {records:,} records planted in {time.perf_counter() - started:.1f} s")

        bare: list[float] = []
        sdk: list[float] = []
        connects: list[float] = []
        listings: list[float] = []
        peaks: list[int] = []
        for _ in range(runs):  # in turns, so a busy moment weighs on both alike
            bare.append(bare_start())
            sdk.append(sdk_import())
            took, listed, peak = connect(root)
            connects.append(took)
            listings.append(listed)
            peaks.append(peak)
        ratio = statistics.median(connects) / statistics.median(bare)
        print(f"python -c pass: {timings(bare)}")
        print(f"python -c 'import mcp.server.mcpserver': {timings(sdk)}")
        print(f"connect + initialize: {timings(connects)}; peak {max(peaks) / 1024:.0f} MiB")
        print(f"connect + initialize + tools/list (the SDK loaded): {timings(listings)}")
        ratios = [c / b for c, b in zip(connects, bare, strict=True)]
        print(f"connect + initialize ratio to a bare interpreter: {ratio:.1f}x (per run: "
              f"min {min(ratios):.1f}x, max {max(ratios):.1f}x; goal <= "
              f"{CONNECT_RATIO_GOAL:.0f}x) {verdict(ratio <= CONNECT_RATIO_GOAL)}")

        server = Server(root)
        server.initialize()
        asked = {"repository": "o3/repo", "limit": 100}
        first_started = time.perf_counter()
        first = server.call("work_items", asked)
        first_took = time.perf_counter() - first_started
        matched = first["structuredContent"]["matched"]
        # Counted up to MATCH_COUNT_LIMIT (10,000), as the answer says.
        assert matched == min(len(range(3, records, REPOSITORIES)), 10_000), first
        calls: list[float] = []
        for _ in range(runs):
            call_started = time.perf_counter()
            server.call("work_items", asked)
            calls.append(time.perf_counter() - call_started)
        every: list[float] = []
        for _ in range(runs):
            call_started = time.perf_counter()
            server.call("work_items", {"limit": 100})
            every.append(time.perf_counter() - call_started)
        filtered: dict[str, list[float]] = {}
        for name, arguments in (("label bug", {"label": "bug", "limit": 100}),
                                ("kind, label and repository",
                                 {"kind": "issue", "label": "bug", "repository": "o3/repo",
                                  "limit": 100})):
            filtered[name] = []
            for _ in range(runs):
                call_started = time.perf_counter()
                server.call("work_items", arguments)
                filtered[name].append(time.perf_counter() - call_started)
        peak = server.close()
        median_ms = statistics.median(calls) * 1000
        print(f"work_items, first call (waits for the SDK to load, builds the host): "
              f"{first_took * 1000:.1f} ms")
        print(f"work_items, one repository ({matched:,} of {records:,} match): "
              f"{timings(calls, 'ms', 1000)}")
        print(f"work_items, every repository: {timings(every, 'ms', 1000)}; server peak "
              f"{peak / 1024:.0f} MiB")
        for name, seconds in filtered.items():
            print(f"work_items, {name}: {timings(seconds, 'ms', 1000)}")
        worst = max(median_ms, statistics.median(every) * 1000,
                    *(statistics.median(seconds) * 1000 for seconds in filtered.values()))
        print(f"work_items ratio to the {CALL_GOAL_MS:.0f} ms goal: "
              f"{worst / CALL_GOAL_MS:.2f}x {verdict(worst <= CALL_GOAL_MS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
