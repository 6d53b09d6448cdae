"""What a purge guarantees: purged rows stay purged when their input is read again,
and no process keeps writing under an id another process's purge deleted.

The soak at the end runs a looping ``hostcore run`` that ingests transcripts while
other processes purge directories and change the policy; at the end every row is
stored under a scope and partition that exist, with counts that agree, or was
purged and stays so, and every line written is one or the other. Sized for CI
(about half a minute); ``HOSTCORE_SOAK_SECONDS`` runs it longer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hostcore.evidence.policy import Policy
from hostcore.evidence.schema import key_digest
from hostcore.evidence.seam import ExportSeam
from hostcore.evidence.store import EvidenceRow, Store


def row(key: str | None, directory: str = "/w/a", partition: str = "p", source: str = "src",
        ts: str = "2025-01-01T00:00:00Z", session: str = "s") -> EvidenceRow:
    return EvidenceRow(partition=partition, source_id=source, directory=directory, key=key,
                       ts=ts, session_id=session, git_remote="git@example.org:o/r.git")


@pytest.fixture
def path(tmp_path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture
def store(path):
    opened = Store(path)
    yield opened
    opened.close()


def integrity(path: Path) -> dict[str, int]:
    """Rows whose scope or partition is gone, and counts that disagree with the rows."""
    db = sqlite3.connect(path)
    try:
        return {
            "orphan_scope": db.execute("SELECT COUNT(*) FROM evidence WHERE scope NOT IN "
                                       "(SELECT id FROM scopes)").fetchone()[0],
            "orphan_part": db.execute("SELECT COUNT(*) FROM evidence WHERE part NOT IN "
                                      "(SELECT id FROM partitions)").fetchone()[0],
            "bad_row_count": db.execute(
                "SELECT COUNT(*) FROM partitions p WHERE row_count != "
                "(SELECT COUNT(*) FROM evidence WHERE part = p.id)").fetchone()[0],
            "bad_tuples": db.execute(
                "SELECT COUNT(*) FROM (SELECT part, scope, git_remote, COUNT(*) AS n FROM "
                "evidence GROUP BY part, scope, git_remote) r LEFT JOIN tuples t USING "
                "(part, scope, git_remote) WHERE t.rows IS NULL OR t.rows != r.n"
            ).fetchone()[0],
        }
    finally:
        db.close()


CLEAN = {"orphan_scope": 0, "orphan_part": 0, "bad_row_count": 0, "bad_tuples": 0}


def readable(store: Store) -> list[str]:
    seam = ExportSeam(store, Policy([]))
    return [key for _, key in seam.read_rows_since_sync(None, 0, ["key"])]


def test_purged_rows_read_again_are_not_stored_again(store):
    store.append([row(str(i)) for i in range(10)])
    assert store.purge(directory="/w/a") == {"p": 10}
    assert store.append([row(str(i)) for i in range(10)]) == 0
    assert store.partitions()["p"].row_count == 0
    assert readable(store) == []


@pytest.mark.parametrize("selector", [{"session_id": "old"}, {"source_id": "src"},
                                      {"before": "2025-06-01T00:00:00Z"}])
def test_every_selector_records_what_it_removed(store, selector):
    store.append([row("gone", session="old", ts="2025-01-01T00:00:00Z")])
    store.purge(**selector)
    assert store.append([row("gone", session="old", ts="2025-01-01T00:00:00Z")]) == 0


def test_new_evidence_in_a_purged_directory_is_stored(store):
    store.append([row("1"), row("2")])
    store.purge(directory="/w/a")
    assert store.append([row("1"), row("3"), row("4")]) == 2
    assert readable(store) == ["3", "4"]


def test_a_purged_key_stays_purged_only_in_its_partition(store):
    store.append([row("k", partition="a")])
    store.purge(directory="/w/a")
    assert store.append([row("k", partition="a"), row("k", partition="b")]) == 1
    assert set(store.partitions()) == {"a", "b"}


def test_a_dry_run_records_nothing(store):
    store.append([row("k")])
    store.purge(directory="/w/a", dry_run=True)
    assert store.append([row("k")]) == 0, "still stored: a duplicate"
    store.purge(directory="/w/a")
    assert store.append([row("k")]) == 0


def test_dropping_a_partition_lets_it_be_filled_again(store):
    store.append([row("k")])
    store.drop_partition("p")
    assert store.append([row("k")]) == 1


def test_rows_without_a_key_are_beyond_a_purge(store):
    store.append([row(None)])
    store.purge(directory="/w/a")
    assert store.append([row(None)]) == 1


def test_the_file_keeps_no_key_of_a_purged_row(store, path):
    store.append([row("s-secret:u-1", session="s-secret")])
    store.purge(session_id="s-secret")
    store.close()
    assert b"s-secret" not in path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or b"s-secret" not in wal.read_bytes()


def test_an_append_after_another_process_purged_uses_no_deleted_scope(path):
    loop, other = Store(path), Store(path)
    try:
        loop.append([row("1", directory="/w/a"), row("2", directory="/w/b")])
        other.purge(directory="/w/a")             # deletes the scope of /w/a
        loop.append([row("3", directory="/w/a")])  # the loop still has it cached
        assert integrity(path) == CLEAN
        assert sorted(readable(loop)) == ["2", "3"]
        assert other.purge(directory="/w/a") == {"p": 1}, "purge --dir finds the row"
    finally:
        loop.close()
        other.close()


def test_an_append_after_another_process_dropped_the_partition_recreates_it(path):
    loop, other = Store(path), Store(path)
    try:
        loop.append([row("1")])
        other.drop_partition("p")
        loop.append([row("2")])
        assert integrity(path) == CLEAN
        assert other.partitions()["p"].row_count == 1
        assert readable(other) == ["2"]
    finally:
        loop.close()
        other.close()


def test_a_store_written_before_tombstones_is_upgraded_and_old_releases_refuse_it(path):
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    db.execute("DROP TABLE purged_keys")
    db.execute("DROP TABLE source_health")
    db.execute("DELETE FROM meta WHERE key = 'purge_seq'")
    db.commit()
    db.close()
    assert Store(path, read_only=True).source_health() == {}
    upgraded = Store(path)
    upgraded.append([row("k")])
    upgraded.purge(directory="/w/a")
    assert upgraded.append([row("k")]) == 0
    upgraded.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("2",)
    finally:
        db.close()


# -- the soak ---------------------------------------------------------------------

SOAK_SECONDS = float(os.environ.get("HOSTCORE_SOAK_SECONDS", "15"))
DIRECTORIES = [f"/soak/d{n}" for n in range(4)]
PURGED = DIRECTORIES[:2]   # purged again and again
FLIPPED = DIRECTORIES[2]   # moved between local-only and full


def hostcore(root: Path, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "claude-code"}
    env.pop("HOSTCORE_ROOT", None)
    return subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kwargs)  # type: ignore[call-overload]


def run(root: Path, *args: str) -> tuple[int, str]:
    proc = hostcore(root, *args)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


class Writer(threading.Thread):
    """Appends Claude Code lines, round-robin over the directories, until stopped."""

    def __init__(self, home: Path, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.folder = home / ".claude" / "projects" / "-soak"
        self.folder.mkdir(parents=True)
        self.stop = stop
        self.keys: list[str] = []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            with (self.folder / f"s{n % 3}.jsonl").open("a") as handle:
                for _ in range(50):
                    session, uuid = f"s{n % 3}", f"u{n}"
                    handle.write(json.dumps({
                        "type": "user", "cwd": DIRECTORIES[n % len(DIRECTORIES)],
                        "sessionId": session, "uuid": uuid,
                        "timestamp": "2025-07-28T22:54:41.466Z"}) + "\n")
                    self.keys.append(f"{session}:{uuid}")
                    n += 1
            time.sleep(0.01)


def loop_of(target: Callable[[int], tuple[int, str]], stop: threading.Event,
            failures: list[str]) -> threading.Thread:
    def body() -> None:
        turn = 0
        while not stop.is_set():
            code, err = target(turn)
            if code != 0:
                failures.append(err)
            turn += 1

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_soak_a_looping_run_purges_and_policy_changes_leave_every_row_stored_or_purged(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[run]\ninterval_seconds = 0.1\n\n[plugins.claude-code]\nhome = "{home}"\n')
    stop = threading.Event()
    writer = Writer(home, stop)
    writer.start()
    looping = hostcore(root, "run")
    failures: list[str] = []
    helpers = [
        loop_of(lambda turn: run(root, "purge", "--dir", PURGED[turn % 2], "--yes"),
                stop, failures),
        # --force: the folder is made up, and has no stored row until the writer's come.
        loop_of(lambda turn: run(root, "policy", ("local-only", "full")[turn % 2], "--force",
                                 FLIPPED),
                stop, failures),
    ]
    try:
        time.sleep(SOAK_SECONDS)
    finally:
        stop.set()
        for thread in [writer, *helpers]:
            thread.join(120)
        looping.send_signal(signal.SIGTERM)
        _, loop_err = looping.communicate(timeout=120)
    assert looping.returncode == 0, loop_err[-2000:]
    assert failures == []
    code, err = run(root, "run", "--once")  # whatever the loop had not read yet
    assert code == 0, err

    path = root / "store.sqlite3"
    assert integrity(path) == CLEAN
    db = sqlite3.connect(path)
    try:
        stored = {k for (k,) in db.execute("SELECT key FROM evidence")}
        purged = {d for (d,) in db.execute("SELECT digest FROM purged_keys")}
        by_directory = dict(db.execute("SELECT s.directory, COUNT(*) FROM evidence e "
                                       "JOIN scopes s ON s.id = e.scope GROUP BY s.directory"))
    finally:
        db.close()
    assert purged, "the soak purged nothing: too short to mean anything"
    lost = [k for k in writer.keys
            if k not in stored and key_digest("claude-code", k) not in purged]
    assert lost == [], f"{len(lost)} of {len(writer.keys)} lines neither stored nor purged"
    assert not [k for k in stored if key_digest("claude-code", k) in purged]

    store = Store(path, read_only=True)
    try:
        seam_rows = sum(1 for _ in ExportSeam(store, Policy([])).read_rows_since_sync(
            None, 0, ["directory"]))
    finally:
        store.close()
    assert seam_rows == len(stored), "a row the seam cannot place is withheld forever"
    for directory in DIRECTORIES:
        code, err = run(root, "purge", "--dir", directory, "--yes")
        assert code == 0, err
    assert integrity(path) == CLEAN
    store = Store(path, read_only=True)
    try:
        left = store.partitions()["claude-code"].row_count
    finally:
        store.close()
    assert left == 0, f"purge --dir could not find every row: {by_directory}"


# -- through the CLI -----------------------------------------------------------------


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "claude-code"}
    env.pop("HOSTCORE_ROOT", None)
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_a_purged_transcript_copied_renamed_or_rewritten_stays_purged(tmp_path):
    home, root = tmp_path / "home", tmp_path / "root"
    folder = home / ".claude" / "projects" / "-w-secret"
    folder.mkdir(parents=True)
    transcript = folder / "s-1.jsonl"
    transcript.write_text("".join(json.dumps({
        "type": "user", "cwd": "/w/secret", "sessionId": "s-1", "uuid": f"u{n}",
        "timestamp": "2025-07-28T22:54:41.466Z"}) + "\n" for n in range(10)))
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(f'[plugins.claude-code]\nhome = "{home}"\n')

    def stored() -> int:
        report = json.loads(cli(root, "evidence", "--json").stdout)
        return int(report["rows"])

    assert cli(root, "run", "--once").returncode == 0 and stored() == 10
    purged = cli(root, "purge", "--dir", "/w/secret", "--yes")
    assert purged.returncode == 0, purged.stderr
    shutil.copy(transcript, folder / "s-1-copy.jsonl")          # same bytes, new inode
    transcript.rename(folder / "s-1-renamed.jsonl")
    (folder / "s-2.jsonl").write_text(transcript.with_name("s-1-renamed.jsonl").read_text())
    assert cli(root, "run", "--once").returncode == 0
    assert stored() == 0
    with (folder / "s-2.jsonl").open("a") as handle:               # new evidence is stored
        handle.write(json.dumps({"type": "user", "cwd": "/w/secret", "sessionId": "s-1",
                                 "uuid": "u-new", "timestamp": "2025-07-29T00:00:00Z"}) + "\n")
    assert cli(root, "run", "--once").returncode == 0
    assert stored() == 1


def test_purge_help_says_what_a_purge_guarantees(tmp_path):
    text = " ".join(cli(tmp_path / "root", "purge", "--help").stdout.split())
    for promise in ("one transaction", "stays purged", "never stores it again",
                    "New evidence is not affected", "Rows without a key"):
        assert promise in text


def test_readers_answer_while_a_writer_holds_the_store(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    store = Store(root / "store.sqlite3")
    store.append([row(str(n)) for n in range(5)])
    store.close()
    writer = sqlite3.connect(root / "store.sqlite3", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE partitions SET row_count = row_count + 1000")
        started = time.monotonic()
        evidence = cli(root, "evidence", "--json")
        status = cli(root, "status", "--json")
        waited = time.monotonic() - started
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert evidence.returncode == 0, evidence.stderr
    assert json.loads(evidence.stdout)["rows"] == 5, "the last committed state"
    assert status.returncode == 0, status.stderr
    assert waited < 30, "neither waited for the writer's busy timeout"


def test_ids_created_by_a_rolled_back_append_are_not_reused(path, monkeypatch):
    import hostcore.evidence.store as store_module

    store = Store(path)
    try:
        def fail(db, inserted):
            raise sqlite3.OperationalError("disk I/O error")

        with monkeypatch.context() as patched:
            patched.setattr(store_module, "_count", fail)
            with pytest.raises(Exception, match="disk I/O error"):
                store.append([row("1", directory="/w/new", partition="fresh")])
        store.append([row("2", directory="/w/new", partition="fresh")])
        assert integrity(path) == CLEAN
        assert readable(store) == ["2"]
    finally:
        store.close()
