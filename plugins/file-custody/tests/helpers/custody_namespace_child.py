"""Judging a pin owner inside a PID namespace whose /proc shows another namespace.

Usage (as PID 1 of ``unshare --pid --fork``, /proc not remounted):
    custody_namespace_child.py <folder>

A real deleter (custody_kill_child.py) pins a file and pauses while validating,
alive; recovery runs beside it, then again after the deleter is SIGKILLed. The
second deleter holds a lifetime lock. Prints one JSON object of what was seen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
from hostcore_file_custody import recover_interrupted_file_deletions
from hostcore_file_custody.private import DeletionManifest

KILL_CHILD = Path(__file__).with_name("custody_kill_child.py")


def _start_deleter(path: Path, lock: Path | None) -> subprocess.Popen[str]:
    args = [sys.executable, str(KILL_CHILD), "delete", str(path), "validating", "no"]
    child = subprocess.Popen(args + ([str(lock)] if lock else []), stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "paused validating"
    return child


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()


def _creator_ticks(folder: Path) -> list[int | None]:
    private = folder / ".custody"
    return [msgspec.json.decode((private / n).read_bytes(), type=DeletionManifest)
            .creator.start_ticks for n in sorted(os.listdir(private)) if n.endswith(".json")]


def _outcomes(folder: Path) -> list[str]:
    # validate says "complete": acting at all on a live owner's pin would delete it.
    return [r.outcome for r in recover_interrupted_file_deletions(folder, lambda source: True)]


def main(folder: Path) -> dict[str, object]:
    # /proc numbers this process as /proc's own namespace sees it.
    proc_is_ours = os.readlink("/proc/self") == str(os.getpid())
    seen: dict[str, object] = {"pid": os.getpid(), "proc_is_ours": proc_is_ours}
    plain = folder / "plain" / "alpha.json"
    plain.parent.mkdir(parents=True)
    plain.write_bytes(b"live heartbeat")
    deleter = _start_deleter(plain, None)
    seen["plain_ticks"] = _creator_ticks(plain.parent)
    seen["plain_live"] = _outcomes(plain.parent)
    _kill(deleter)
    seen["plain_killed"] = _outcomes(plain.parent)  # no lock: death cannot be proven

    locked = folder / "locked" / "alpha.json"
    locked.parent.mkdir(parents=True)
    locked.write_bytes(b"live heartbeat")
    deleter = _start_deleter(locked, folder / "owner.lock")
    seen["locked_live"] = _outcomes(locked.parent)
    _kill(deleter)
    recovered = recover_interrupted_file_deletions(locked.parent, lambda source: False)
    seen["locked_killed"] = [r.outcome for r in recovered]
    seen["locked_back"] = locked.read_bytes().decode() if locked.exists() else None
    return seen


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))), flush=True)
