"""Faults while ``hostcore run --once`` drains a backlog, batches being stored on the
writer thread while the next ones are read: a SIGKILL, wherever it lands, or a disk
that fills up. The next run finishes the drain with every line stored exactly once.

Real processes over real transcript files, killed at random points of their drain,
and a real tmpfs that runs out of room.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

CLAUDE_SESSIONS, CLAUDE_LINES = 20, 2_500
CODEX_ROLLOUTS, CODEX_LINES = 10, 2_000  # each after its session_meta header
EXPECTED = {"claude-code": CLAUDE_SESSIONS * CLAUDE_LINES,
            "codex": CODEX_ROLLOUTS * (CODEX_LINES + 1)}


def backlog(home: Path) -> None:
    """Claude Code sessions and Codex rollouts: many 5,000-line batches of each."""
    projects = home / ".claude" / "projects" / "-work"
    projects.mkdir(parents=True)
    for s in range(CLAUDE_SESSIONS):
        (projects / f"s{s:02d}.jsonl").write_text("".join(
            json.dumps({"type": "user", "cwd": f"/w/p{s % 4}", "sessionId": f"s{s:02d}",
                        "uuid": f"u{s}-{n}", "timestamp": "2025-07-28T22:54:41.466Z"}) + "\n"
            for n in range(CLAUDE_LINES)))
    rollouts = home / ".codex" / "sessions" / "2025" / "09" / "14"
    rollouts.mkdir(parents=True)
    for r in range(CODEX_ROLLOUTS):
        header = {"timestamp": "2025-09-14T10:00:00.000Z", "type": "session_meta",
                  "payload": {"id": f"x-{r}", "cwd": f"/w/p{r % 4}"}}
        items = ({"timestamp": f"2025-09-14T10:00:{n % 60:02d}.000Z", "type": "event_msg",
                  "payload": {"n": n}} for n in range(CODEX_LINES))
        (rollouts / f"rollout-r{r:02d}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in (header, *items)))


def stored(root: Path) -> dict[str, int]:
    if not (root / "store.sqlite3").exists():
        return {}
    try:
        with sqlite3.connect(f"file:{root / 'store.sqlite3'}?mode=ro", uri=True) as db:
            return dict(db.execute("SELECT p.name, COUNT(*) FROM evidence e JOIN partitions "
                                   "p ON p.id = e.part GROUP BY p.name"))
    except sqlite3.OperationalError:
        return {}  # the first run is still creating the file's tables


def run_once(root: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "claude-code,codex"}
    return subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                             "--once"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkill_while_batches_are_stored_behind_the_reading_loses_and_doubles_nothing(
        tmp_path):
    home = tmp_path / "home"
    backlog(home)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n[plugins.codex]\nhome = "{home}"\n')
    total = sum(EXPECTED.values())
    rng = random.Random(11)
    seen: list[int] = []
    for _ in range(8):
        before = sum(stored(root).values())
        run = run_once(root)
        # Kill at a random moment after this run stored its first batch, whatever
        # the machine's speed: the writer is then busy with the next one or soon is.
        while run.poll() is None and sum(stored(root).values()) == before:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.15))
        run.send_signal(signal.SIGKILL)
        run.communicate()
        seen.append(sum(stored(root).values()))
        if seen[-1] == total:
            break
    assert any(0 < n < total for n in seen), f"no kill landed mid-drain: {seen}"
    last = run_once(root)
    _, err = last.communicate(timeout=120)
    assert last.returncode == 0, err.decode()
    assert stored(root) == EXPECTED
    with sqlite3.connect(root / "store.sqlite3") as db:
        rows, keys = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT part || ':' || key) FROM evidence").fetchone()
    assert rows == keys == total


FULL_DISK_SCRIPT = '''
"""In a mount namespace: the state root on a tmpfs too small for the backlog, one
run --once that fills it, then the tmpfs grown and one more run (JSON results out)."""
import json, os, sqlite3, subprocess, sys
from pathlib import Path

home, root = Path(sys.argv[1]), Path(sys.argv[2])
root.mkdir(mode=0o700)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", str(root)],
               check=True)
(root / "hostcore.toml").write_text(
    f'[plugins.claude-code]\\nhome = "{home}"\\n[plugins.codex]\\nhome = "{home}"\\n')
env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "claude-code,codex"}
runs = []
for size in ("6m", "64m"):
    subprocess.run(["mount", "-o", f"remount,size={size}", str(root)], check=True)
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                           "--once"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    with sqlite3.connect(f"file:{root / 'store.sqlite3'}?mode=ro", uri=True) as db:
        stored = db.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]
    runs.append({"status": done.returncode, "stderr": done.stderr, "stored": stored})
with sqlite3.connect(root / "store.sqlite3") as db:
    counts = dict(db.execute("SELECT p.name, COUNT(*) FROM evidence e JOIN partitions p "
                             "ON p.id = e.part GROUP BY p.name"))
    rows, keys = db.execute(
        "SELECT COUNT(*), COUNT(DISTINCT part || ':' || key) FROM evidence").fetchone()
print(json.dumps({"runs": runs, "counts": counts, "rows": rows, "keys": keys}))
'''


def test_a_disk_that_fills_while_batches_are_stored_behind_the_reading_loses_nothing(
        tmp_path, mount_namespace):
    home = tmp_path / "home"
    backlog(home)
    script = tmp_path / "full_disk.py"
    script.write_text(FULL_DISK_SCRIPT)
    done = subprocess.run([*mount_namespace, sys.executable, str(script), str(home),
                           str(tmp_path / "root")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    full, roomy = found["runs"]
    # The full disk fails the run, naming the store and the reason, never a path of
    # a transcript; the run after it, with room again, stores every line once.
    assert 0 < full["stored"] < sum(EXPECTED.values()), "the disk filled mid-drain"
    assert full["status"] == 1, full["stderr"]
    assert "store.sqlite3" in full["stderr"] and "no space left" in full["stderr"].lower()
    assert str(home) not in full["stderr"]
    # ... and the tick line still says how many rows it stored before the disk filled.
    assert f"rows in {full['stored']:,}" in full["stderr"]
    assert roomy["status"] == 0, roomy["stderr"]
    assert found["counts"] == EXPECTED
    assert found["rows"] == found["keys"] == sum(EXPECTED.values())
