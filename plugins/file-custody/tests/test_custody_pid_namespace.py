"""Death needs positive proof: inside ``unshare --pid`` without a fresh /proc, a live
owner is never judged dead, and only its lifetime lock can prove it died."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).parent / "helpers" / "custody_namespace_child.py"


def _in_new_pid_namespace(faults, tmp_path):
    prefix = faults.unshare_prefix("--pid", "--fork", "--kill-child")
    result = subprocess.run([*prefix, sys.executable, str(CHILD), str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_live_owner_in_a_pid_namespace_with_a_foreign_proc_is_never_judged_dead(faults,
                                                                                 tmp_path):
    seen = _in_new_pid_namespace(faults, tmp_path)
    assert seen["pid"] == 1 and seen["proc_is_ours"] is False
    # The owner's own start time is unknown there: nothing is recorded from /proc.
    assert seen["plain_ticks"] == [None]
    assert seen["plain_live"] == ["kept-unknown-owner"]
    # Killed without a lifetime lock, nothing proves its death: the pin stays.
    assert seen["plain_killed"] == ["kept-unknown-owner"]


def test_in_such_a_namespace_only_the_lifetime_lock_proves_death(faults, tmp_path):
    seen = _in_new_pid_namespace(faults, tmp_path)
    assert seen["locked_live"] == ["kept-unknown-owner"]  # its lock is held: alive or not
    assert seen["locked_killed"] == ["restored"]  # the kernel dropped it: dead
    assert seen["locked_back"] == "live heartbeat"
