"""A hostcore process for the crash tests: ticks the github-capture worker, and can
SIGKILL itself at a chosen point.

    python capture_crash_child.py ROOT --budget N [--kill-after-rows K |
        --kill-after-save K | --kill-after-swap] [--max-ticks T]

It builds a real Host on ROOT with the real worker (gh found on ``PATH``, so the
test's fake gh), ticks until nothing is pending, and prints a JSON summary.
Events go to ``ROOT/events.jsonl`` as they are emitted, so the parent sees
what a killed process emitted before it died. The kill points patch this
process only: the seam read (mid-slice, before anything is persisted) and the
sidecar state write (after a slice's write, or after the swap's write).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from hostcore_github_capture import state as state_module
from hostcore_github_capture.events import EVENTS
from hostcore_github_capture.worker import CaptureWorker

from hostcore.host import Host
from hostcore.plugin.markers import hookimpl


class Plugin:
    __name__ = "github-capture-crash-child"

    def __init__(self, budget: int, events_path: Path) -> None:
        self.budget = budget
        self.events_path = events_path
        self.name = "crash-child-events"

    def receive(self, event: Any) -> None:
        with open(self.events_path, "a") as handle:
            handle.write(json.dumps({"name": event.name, "attributes": event.attributes}) + "\n")

    @hookimpl
    def hostcore_events(self) -> Any:
        return EVENTS

    @hookimpl
    def hostcore_workers(self, host: Any) -> Any:
        return CaptureWorker(host, row_budget=self.budget, unit="rows")

    @hookimpl
    def hostcore_telemetry_sinks(self, host: Any) -> Any:
        return self


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--budget", type=int, required=True)
    parser.add_argument("--kill-after-rows", type=int)
    parser.add_argument("--kill-after-save", type=int)
    parser.add_argument("--kill-after-swap", action="store_true")
    parser.add_argument("--max-ticks", type=int, default=1000)
    args = parser.parse_args()

    saves = 0
    original_save = state_module.StateFile.save

    def save(self: Any, value: Any) -> None:
        nonlocal saves
        before = self.load() if self.path.name == state_module.SIDECAR_FILE else None
        original_save(self, value)
        if self.path.name != state_module.SIDECAR_FILE:
            return
        saves += 1
        if args.kill_after_save is not None and saves == args.kill_after_save:
            die()
        swapped = before is not None and before.revalidation is not None \
            and value.revalidation is None
        if args.kill_after_swap and swapped:
            die()

    state_module.StateFile.save = save  # type: ignore[method-assign]

    host = Host(root=args.root, plugins=[Plugin(args.budget, args.root / "events.jsonl")],
                load_entrypoints=False, env=dict(os.environ))
    seam = host.seam
    original_read = seam.read_rows_since_sync
    yielded = 0

    def read(partition: Any, cursor: int, columns: Any, *, until: int | None = None) -> Any:
        nonlocal yielded
        for row in original_read(partition, cursor, columns, until=until):
            yielded += 1
            if args.kill_after_rows is not None and yielded == args.kill_after_rows:
                die()
            yield row

    seam.read_rows_since_sync = read  # type: ignore[method-assign]
    ticks = 0
    with host:
        for ticks in range(1, args.max_ticks + 1):  # noqa: B007 - reported below
            report = host.tick()
            if not report.ok:
                print(json.dumps({"failed": [s.error for s in report.failed]}))
                return 1
            if not report.pending:
                break
    print(json.dumps({"rows_yielded": yielded, "ticks": ticks, "saves": saves}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
