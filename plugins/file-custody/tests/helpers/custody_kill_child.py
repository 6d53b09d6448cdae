"""A pin owner that pauses at one step of a deletion so its parent can SIGKILL it there.

Usage: custody_kill_child.py delete <path> <pause-step> <validate yes|no> [<lifetime lock>]
       custody_kill_child.py sweep <registry> <pause-point> [<seconds> [<subject part>
                                                                         [<others' seconds>]]]

It prints ``paused <step>`` when it reaches the step, then sleeps until killed
(or, for a sweep given ``seconds``, that long before it goes on; given a subject
part, a sweep pauses only where the hook's subject contains it, and at the others
waits ``others' seconds``, as a slow disk would). If it never
reaches the step it finishes and prints ``done <outcome>``. A deleter given a
lifetime lock holds it from the start and records it as its proof of life.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hostcore_file_custody import (
    HeartbeatRegistry,
    StaleSweep,
    SweepHooks,
    capture_file_revision,
    delete_file_if_unchanged,
)
from hostcore_file_custody.locks import lock_exclusive


def pause(step: str, seconds: float = 600.0) -> None:
    print(f"paused {step}", flush=True)
    time.sleep(seconds)


def delete(path: str, step: str, answer: str, lock: str | None = None) -> None:
    # Held until this process dies: the name keeps the lock referenced.
    held = lock_exclusive(Path(lock)) if lock is not None else None
    revision = capture_file_revision(path)
    assert revision is not None

    def on_step(name: str) -> None:
        if name == step:
            pause(name)

    def validate(_pinned: object) -> bool:
        if step == "validating":
            pause(step)
        return answer == "yes"

    result = delete_file_if_unchanged(path, revision, validate, on_step=on_step, owner_lock=lock)
    print(f"done {result.outcome}", flush=True)
    del held


def sweep(root: str, point: str, seconds: str = "600", only: str = "",
          others: str = "0") -> None:
    def hook(subject: str) -> None:
        if only in subject:
            pause(point, float(seconds))
        else:
            time.sleep(float(others))

    hooks = SweepHooks(**{point: hook})
    report = StaleSweep(HeartbeatRegistry(root), hooks=hooks).run()
    print(f"done {report.deleted}", flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"delete": delete, "sweep": sweep}[command](*args)
