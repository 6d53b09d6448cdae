"""The holder line of a ``file_lock``: what a waiting process reads to say who it
waits for. Written once the lock is held, and left alone when the file already
holds exactly that line (each step of a tick takes the step lock again)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from hostcore.files import file_lock
from hostcore.host import STEP_LOCK_FILE, Host

OLD = 1_000_000_000  # an mtime (seconds) no write of this test's could leave


def busy_holder_seen_by_another_process(path: Path) -> str:
    """What a second process, failing to take the lock on ``path``, says holds it."""
    script = textwrap.dedent(f"""
        from hostcore.files import LockBusy, file_lock
        try:
            with file_lock({str(path)!r}, timeout=0.2, holder="pid 2 (waiting)"):
                print("NOT BUSY")
        except LockBusy as busy:
            print(busy.holder)
    """)
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def test_the_holder_line_is_the_whole_file_while_held(tmp_path):
    path = tmp_path / "run.lock"
    with file_lock(path, holder="pid 123456 (a long activity name)"):
        pass
    with file_lock(path, holder="pid 7 (short)"):
        assert path.read_bytes() == b"pid 7 (short)"
        assert busy_holder_seen_by_another_process(path) == "pid 7 (short)"


def test_the_same_holder_taking_the_lock_again_leaves_the_file_unwritten(tmp_path):
    path = tmp_path / "run.lock"
    with file_lock(path, holder="pid 7 (hostcore run)"):
        pass
    os.utime(path, (OLD, OLD))
    with file_lock(path, holder="pid 7 (hostcore run)"):
        assert path.read_bytes() == b"pid 7 (hostcore run)"
    assert path.stat().st_mtime == OLD


def test_a_file_that_only_starts_with_the_holder_line_is_rewritten(tmp_path):
    path = tmp_path / "run.lock"
    path.write_bytes(b"pid 7 (hostcore run) and a tail a killed writer left")
    with file_lock(path, holder="pid 7 (hostcore run)"):
        assert path.read_bytes() == b"pid 7 (hostcore run)"


def test_a_lock_without_a_holder_leaves_the_last_line_in_place(tmp_path):
    path = tmp_path / "run.lock"
    with file_lock(path, holder="pid 7 (hostcore run)"):
        pass
    with file_lock(path):
        assert path.read_bytes() == b"pid 7 (hostcore run)"


def test_after_a_tick_the_step_lock_names_this_process(tmp_path):
    host = Host(root=tmp_path / "root", load_entrypoints=False, env={})
    try:
        host.activity = "hostcore run --once"
        report = host.tick()
        assert report.ok and len(report.steps) > 1  # the lock was taken step after step
        mine = f"pid {os.getpid()} (hostcore run --once)"
        lock = host.root / STEP_LOCK_FILE
        assert lock.read_text() == mine
        with host.step_lock():
            assert busy_holder_seen_by_another_process(lock) == mine
    finally:
        host.close()


def test_after_a_holder_is_killed_the_next_holder_replaces_its_line(tmp_path):
    path = tmp_path / "run.lock"
    script = textwrap.dedent(f"""
        import sys, time
        from hostcore.files import file_lock
        with file_lock({str(path)!r}, holder="pid 99999999 (a killed run with a long name)"):
            print("held", flush=True)
            time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        assert busy_holder_seen_by_another_process(path) == (
            "pid 99999999 (a killed run with a long name)")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        child.stdout.close()  # type: ignore[union-attr]
    with file_lock(path, timeout=5, holder="pid 8 (next)"):  # the kernel dropped the flock
        assert path.read_bytes() == b"pid 8 (next)"
        assert busy_holder_seen_by_another_process(path) == "pid 8 (next)"
