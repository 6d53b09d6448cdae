"""A store file replaced or removed while a process has it open (a restored backup,
a user's ``mv``): nothing more is written into the old file, and ``hostcore run``
stops saying so, so the next start uses the file that is there now."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostcore.evidence.store import EvidenceRow, Store, StoreError

HOSTCORE = [sys.executable, "-m", "hostcore"]


def rows(*keys: str) -> list[EvidenceRow]:
    return [EvidenceRow(partition="p", source_id="s", key=key) for key in keys]


def stored_keys(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [key for (key,) in db.execute("SELECT key FROM evidence ORDER BY position")]
    finally:
        db.close()


@pytest.fixture
def store(tmp_path):
    opened = Store(tmp_path / "store.sqlite3")
    yield opened
    opened.close()


def test_a_replaced_store_file_refuses_writes_and_writes_nothing_into_the_new_one(
        store, tmp_path):
    store.append(rows("a"))
    backup = tmp_path / "backup.sqlite3"
    Store(backup).close()
    os.replace(backup, store.path)
    assert store.replaced()
    with pytest.raises(StoreError, match="replaced or removed"):
        store.append(rows("b"))
    assert "b" not in stored_keys(store.path)


def test_a_removed_store_file_refuses_writes(store):
    os.unlink(store.path)
    with pytest.raises(StoreError, match="replaced or removed"):
        store.append(rows("a"))
    assert not store.path.exists(), "no new file is made behind the user's back"


def test_a_store_left_in_place_is_not_taken_for_replaced(store):
    store.append(rows("a"))
    store.append(rows("b"))
    assert not store.replaced()
    assert stored_keys(store.path) == ["a", "b"]


def transcript_root(tmp_path: Path, lines: int) -> tuple[Path, Path]:
    root, home = tmp_path / "state", tmp_path / "home"
    session = home / ".claude" / "projects" / "p"
    session.mkdir(parents=True)
    (session / "s.jsonl").write_text("".join(
        '{"type":"user","sessionId":"s","cwd":"/w","timestamp":"2026-01-01T00:00:00Z",'
        f'"uuid":"u{i}"}}\n' for i in range(lines)))
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[run]\ninterval_seconds = 0.2\n[plugins.claude-code]\nhome = "{home}"\n')
    return root, session / "s.jsonl"


def test_run_stops_with_exit_1_when_its_store_is_replaced_and_the_next_run_loses_nothing(
        tmp_path):
    root, transcript = transcript_root(tmp_path, 3)
    store = root / "store.sqlite3"
    loop = subprocess.Popen([*HOSTCORE, "--root", str(root), "run", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        loop.stdout.readline()  # type: ignore[union-attr]  # the first tick ingested 3 rows
        restored = tmp_path / "restored.sqlite3"
        shutil.copy(store, restored)
        os.replace(restored, store)  # the backup holds the same 3 rows and their cursor
        with transcript.open("a") as handle:
            handle.write('{"type":"user","sessionId":"s","cwd":"/w",'
                         '"timestamp":"2026-01-01T00:00:01Z","uuid":"late"}\n')
        _, stderr = loop.communicate(timeout=60)
    finally:
        if loop.poll() is None:
            loop.send_signal(signal.SIGTERM)
            loop.communicate(timeout=30)
    assert loop.returncode == 1, stderr
    assert "replaced or removed" in stderr and str(store) in stderr
    again = subprocess.run([*HOSTCORE, "--root", str(root), "run", "--once"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert stored_keys(store) == ["s:u0", "s:u1", "s:u2", "s:late"]


def test_a_second_process_replacing_the_store_mid_run_is_noticed_within_a_tick(tmp_path):
    root, _ = transcript_root(tmp_path, 1)
    loop = subprocess.Popen([*HOSTCORE, "--root", str(root), "run", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        loop.stdout.readline()  # type: ignore[union-attr]
        os.unlink(root / "store.sqlite3")
        started = time.monotonic()
        _, stderr = loop.communicate(timeout=60)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert loop.returncode == 1, stderr
    assert time.monotonic() - started < 30
    assert not (root / "store.sqlite3").exists()
