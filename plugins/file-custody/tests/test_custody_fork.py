"""A forked child never keeps a dead session alive: whatever way the session started a
child (fork, forkserver, spawn, subprocess), once the session is SIGKILLed its
instance restarts at once and a sweep proves it dead, while the child still runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hostcore_file_custody import StaleSweep

CHILD = Path(__file__).parent / "helpers" / "custody_fork_child.py"


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn", "subprocess"])
def test_a_killed_session_restarts_at_once_while_its_child_lives(registry, kit, method):
    session = subprocess.Popen([sys.executable, str(CHILD), str(registry.root), "alpha", method],
                               stdout=subprocess.PIPE, text=True)
    grandchild = 0
    try:
        line = session.stdout.readline().strip()
        assert line.startswith("ready "), line
        grandchild = int(line.split()[1])
        session.send_signal(signal.SIGKILL)
        session.wait(timeout=30)
        os.kill(grandchild, 0)  # the child outlives the session

        kit.age(registry.heartbeat_path("alpha"))
        report = StaleSweep(registry).run()
        assert (report.deleted, report.kept_live) == (1, 0)
        with registry.start_session("alpha", wait_seconds=0) as restarted:
            assert restarted.owner.pid == os.getpid()
    finally:
        _kill(session.pid)
        if grandchild:
            _kill(grandchild)


def test_a_forked_child_closing_its_copy_of_a_session_leaves_the_parents_alone(registry):
    result = subprocess.run([sys.executable, str(CHILD), str(registry.root), "alpha",
                             "fork-then-close"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"child_exit": 0, "heartbeat_kept": True, "generation_status": "live",
                    "parent_can_refresh": 1}
