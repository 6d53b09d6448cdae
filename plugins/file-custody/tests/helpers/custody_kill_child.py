"""A pin owner that pauses at one step of a deletion so its parent can SIGKILL it there.

Usage: custody_kill_child.py delete <path> <pause-step> <validate yes|no>
       custody_kill_child.py sweep <registry> <pause-point>

It prints ``paused <step>`` when it reaches the step, then sleeps until killed.
If it never reaches the step it finishes and prints ``done <outcome>``.
"""

from __future__ import annotations

import sys
import time

from hostcore_file_custody import (
    HeartbeatRegistry,
    StaleSweep,
    SweepHooks,
    capture_file_revision,
    delete_file_if_unchanged,
)


def pause(step: str) -> None:
    print(f"paused {step}", flush=True)
    time.sleep(600)


def delete(path: str, step: str, answer: str) -> None:
    revision = capture_file_revision(path)
    assert revision is not None

    def on_step(name: str) -> None:
        if name == step:
            pause(name)

    def validate(_pinned: object) -> bool:
        if step == "validating":
            pause(step)
        return answer == "yes"

    result = delete_file_if_unchanged(path, revision, validate, on_step=on_step)
    print(f"done {result.outcome}", flush=True)


def sweep(root: str, point: str) -> None:
    hooks = SweepHooks(**{point: lambda subject: pause(point)})
    report = StaleSweep(HeartbeatRegistry(root), hooks=hooks).run()
    print(f"done {report.deleted}", flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"delete": delete, "sweep": sweep}[command](*args)
