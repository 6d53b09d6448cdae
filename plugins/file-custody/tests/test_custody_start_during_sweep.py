"""A sweep never makes a start fail: a start waits for the sweep's step on its one
instance (a sweep in another process, held there by a hook), and when it must give
up, its message names the sweep."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostcore_file_custody import CustodyRefused

CHILD = Path(__file__).parent / "helpers" / "custody_kill_child.py"


def _sweep_paused_at_audit(registry, seconds: float) -> subprocess.Popen[str]:
    sweep = subprocess.Popen([sys.executable, str(CHILD), "sweep", str(registry.root),
                              "before_audit", str(seconds)], stdout=subprocess.PIPE, text=True)
    assert sweep.stdout.readline().strip() == "paused before_audit"
    return sweep


def test_a_start_waits_for_a_sweeps_step_on_its_instance_longer_than_its_own_wait(registry,
                                                                                  kit):
    planted = kit.plant_stale(registry, "alpha")
    sweep = _sweep_paused_at_audit(registry, 1.0)  # holds alpha's custody for a second
    try:
        started = time.monotonic()
        with registry.start_session("alpha", wait_seconds=0.2) as session:
            waited = time.monotonic() - started
            assert session.generation_id != planted.generation_id
            assert registry.read_heartbeat("alpha").generation_id == session.generation_id
        assert 0.5 < waited < 30
        assert sweep.stdout.readline().strip() == "done 1"  # its stale revision, only it
    finally:
        sweep.kill()
        sweep.wait()


def test_a_sweep_holding_one_instance_never_delays_the_start_of_another(registry, kit):
    kit.plant_stale(registry, "alpha")
    sweep = _sweep_paused_at_audit(registry, 600)
    try:
        started = time.monotonic()
        with registry.start_session("gamma", wait_seconds=0):
            assert time.monotonic() - started < 1.0
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()


def test_a_start_given_up_on_a_stuck_sweep_names_the_sweep(registry, kit):
    kit.plant_stale(registry, "alpha")
    sweep = _sweep_paused_at_audit(registry, 600)
    try:
        with pytest.raises(CustodyRefused, match="held by a sweep") as refused:
            registry.start_session("alpha", wait_seconds=0, sweep_wait_seconds=0.2)
        assert refused.value.holder == "sweep" and refused.value.reason == "held"
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()


def test_a_start_refused_by_a_live_session_says_so(registry):
    with registry.start_session("alpha"):
        with pytest.raises(CustodyRefused, match="held by a live session") as refused:
            # A live session is never waited on as long as a sweep would be.
            registry.start_session("alpha", wait_seconds=0, sweep_wait_seconds=30)
        assert refused.value.holder == "session"
