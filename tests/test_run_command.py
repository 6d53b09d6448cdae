"""``hostcore run`` as a user watches it: a line per tick, JSON Lines, a progress line."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOSTCORE = [sys.executable, "-m", "hostcore"]


@pytest.fixture
def root_with_transcript(tmp_path: Path) -> Path:
    """A root whose Claude Code folder holds one session of seven lines."""
    root = tmp_path / "state"
    home = tmp_path / "home"
    session = home / ".claude" / "projects" / "p"
    session.mkdir(parents=True)
    lines = "".join(
        '{"type":"user","sessionId":"s","cwd":"/w","timestamp":"2026-01-01T00:00:00Z",'
        f'"uuid":"u{i}","message":{{"role":"user","content":"hi"}}}}\n' for i in range(7))
    (session / "s.jsonl").write_text(lines)
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[run]\ninterval_seconds = 0.2\n[plugins.claude-code]\nhome = "{home}"\n')
    return root


def hostcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOSTCORE, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_run_once_prints_one_line_per_tick_saying_what_changed(root_with_transcript):
    first = hostcore("--root", str(root_with_transcript), "run", "--once")
    assert first.returncode == 0, first.stderr
    assert "rows in 7" in first.stderr.splitlines()[-1]
    again = hostcore("--root", str(root_with_transcript), "run", "--once")
    assert again.stderr.splitlines()[-1].endswith("nothing changed")


def test_run_json_prints_one_json_object_per_tick(root_with_transcript):
    loop = subprocess.Popen([*HOSTCORE, "--root", str(root_with_transcript), "run", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ticks = [json.loads(loop.stdout.readline()) for _ in range(3)]  # type: ignore[union-attr]
    finally:
        loop.send_signal(signal.SIGTERM)
        loop.communicate(timeout=30)
    assert [set(t) for t in ticks] == [{"ok", "pending", "steps", "duration_ms"}] * 3
    ingest = [next(s for s in t["steps"] if s["name"] == "ingest") for t in ticks]
    assert [s["counts"]["rows"] for s in ingest] == [7, 0, 0]


def test_a_terminal_sees_a_progress_line_while_rows_are_ingested(root_with_transcript):
    leader, follower = pty.openpty()
    child = subprocess.Popen([*HOSTCORE, "--root", str(root_with_transcript), "run", "--once"],
                             stdout=subprocess.DEVNULL, stderr=follower, close_fds=True)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif child.poll() is not None:
            break
    child.wait(timeout=30)
    os.close(leader)
    assert child.returncode == 0, seen
    assert b"\ringest: 7 rows so far" in seen.replace(b"\x1b[K", b"")
    assert b"rows in 7" in seen
