"""The stamp store under faults, through real ``hostcore`` processes.

* ``hostcore stamp`` killed with SIGKILL while it writes loses nothing: the store
  stays readable, ``check`` answers for every earlier stamp, and a re-run completes.
* A second ``hostcore`` stamping or approving while ``check`` runs: ``check``
  answers the state before the write or after it, never an error or half of it.

The fault lands where it is meant to, never after a sleep: the writer runs under
``strace``, which kills it (or stops it, for the reader to run meanwhile) at the
Nth ``pwrite64`` to one file of the store, so it is inside the write by
construction. The test then checks that it was (the write-ahead log holds the
transaction's pages, none of them committed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostcore.governance.stamps import FILE
from hostcore.testing import require_tool

_spec = importlib.util.spec_from_file_location(
    "governance_helpers", Path(__file__).with_name("governance_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

FOLDERS = 100
PER_FOLDER = 200  # 20,000 targets: one stamp transaction of some 1,300 pages
EARLY = 50
# The Nth write into the write-ahead log, where the fault lands: past its header,
# far before the transaction's last page (some 2,600 writes: a frame header and a
# page each).
MID_TRANSACTION = 100
# Writes into the database file itself happen only when the log is checkpointed
# into it, after the commit: the Nth of them is inside the checkpoint.
MID_CHECKPOINT = 10
# The Nth read of the store's file by a check, where it is stopped: past the
# header, inside its first statements' pages (some 35 a statement of 900 targets).
MID_READS = 30
DEADLINE = 300.0  # seconds; generous, the machine is shared


@pytest.fixture
def store(tmp_path: Path) -> tuple[helpers.Repo, list[str], list[str]]:
    """A repository whose ``early/`` files are stamped, and 20,000 more files (their
    paths relative to the repository) that are not yet."""
    require_tool("strace", "Debian's `strace` package")
    repo = helpers.Repo(tmp_path)
    repo.write("CLAUDE.md", "use tabs\n")
    early = [f"early/e{n}.py" for n in range(EARLY)]
    for path in early:
        repo.write(path, "x = 1\n")
    many = []
    for folder in range(FOLDERS):
        (repo.top / "src" / f"d{folder}").mkdir(parents=True)
        for n in range(PER_FOLDER):
            path = f"src/d{folder}/f{n}.py"
            (repo.top / path).write_text("y = 2\n")
            many.append(path)
    done = repo.hostcore("stamp", *early)
    assert done.returncode == 0, done.stderr
    assert not wal(repo).exists(), "the earlier stamp's process closed the store cleanly"
    return repo, early, many


def wal(repo: helpers.Repo) -> Path:
    return (repo.root / FILE).with_name(FILE.name + "-wal")


def traced(repo: helpers.Repo, watched: Path, inject: str, *args: str,
           log: Path | None = None, call: str = "pwrite64") -> subprocess.Popen[str]:
    """``hostcore ARGS`` under strace, ``inject`` done at its ``call``s (writes, unless
    told) on ``watched``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env["HOSTCORE_LOAD_PLUGINS"] = ""
    env["COLUMNS"] = "200"
    return subprocess.Popen(
        ["strace", "-f", "-o", str(log or os.devnull), "-P", str(watched),
         "-e", f"trace={call}", "-e", f"inject={call}:{inject}",
         sys.executable, "-m", "hostcore", "--root", str(repo.root), *args],
        cwd=repo.top, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def statuses(repo: helpers.Repo, *paths: str) -> tuple[int, dict[str, tuple[str, tuple[str, ...]]]]:
    """``check --json PATHS``: its exit status and each target's (status, moved)."""
    done = repo.hostcore("check", "--json", *paths)
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr == "", "no fault said on stderr"
    return done.returncode, {t["path"]: (t["status"], tuple(t["moved"]))
                             for t in json.loads(done.stdout)["targets"]}


def absolute(repo: helpers.Repo, paths: list[str]) -> list[str]:
    return [str(repo.top / p) for p in paths]


def test_stamp_killed_mid_transaction_loses_no_earlier_stamp_and_a_rerun_completes(store):
    repo, early, many = store
    killed = traced(repo, wal(repo), f"signal=SIGKILL:when={MID_TRANSACTION}", "stamp", *many)
    _, err = killed.communicate(timeout=DEADLINE)
    assert killed.returncode == -signal.SIGKILL, err
    assert wal(repo).stat().st_size > 0, "the kill landed while the log was being written"

    code, found = statuses(repo, *early)
    assert code == 0
    assert found == {p: ("current", ()) for p in absolute(repo, early)}
    # None of the killed transaction's stamps: it never committed, and nothing is torn.
    code, found = statuses(repo, *many)
    assert code == 0
    assert found == {p: ("unstamped", ()) for p in absolute(repo, many)}

    again = repo.hostcore("stamp", *many)
    assert again.returncode == 0, again.stderr
    code, found = statuses(repo)
    assert code == 0
    assert found == {p: ("current", ()) for p in absolute(repo, early + many)}


def test_stamp_killed_mid_checkpoint_keeps_every_stamp_it_committed(store):
    repo, early, many = store
    killed = traced(repo, repo.root / FILE, f"signal=SIGKILL:when={MID_CHECKPOINT}",
                    "stamp", *many)
    _, err = killed.communicate(timeout=DEADLINE)
    assert killed.returncode == -signal.SIGKILL, err
    assert wal(repo).stat().st_size > 0, "the kill left the log uncheckpointed"

    code, found = statuses(repo)
    assert code == 0
    assert found == {p: ("current", ()) for p in absolute(repo, early + many)}
    again = repo.hostcore("stamp", *early)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("command", ["stamp", "approve"])
def test_check_while_another_process_writes_answers_the_state_before_it_then_after(
        store, tmp_path, command):
    """The writer is stopped inside its transaction (pages of it in the log) while
    ``check`` runs: ``check`` answers every target by its old basis. Once the writer
    has committed, by its new one. Both exit with their documented statuses."""
    repo, early, many = store
    stamped = repo.hostcore("stamp", *many)
    assert stamped.returncode == 0, stamped.stderr
    repo.write("CLAUDE.md", "use spaces\n")  # every basis so far is stale now
    everything = absolute(repo, early + many)
    stale = {p: ("stale", ("context",)) for p in everything}
    assert statuses(repo) == (1, stale)

    log = tmp_path / "strace.log"
    writer = traced(repo, wal(repo), f"signal=SIGSTOP:when={MID_TRANSACTION}", command,
                    *early, *many, log=log)
    try:
        tracee = stopped(writer, log)
        assert wal(repo).stat().st_size > 0, "the writer stopped inside its write"
        assert statuses(repo) == (1, stale), "the uncommitted write is not seen"
        assert statuses(repo, *early) == (1, {p: stale[p] for p in absolute(repo, early)})
        os.kill(tracee, signal.SIGCONT)
        _, err = writer.communicate(timeout=DEADLINE)
        assert writer.returncode == 0, err
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert statuses(repo) == (0, {p: ("current", ()) for p in everything})


def test_a_check_reading_while_another_process_stamps_answers_one_state_whole(store, tmp_path):
    """``check`` of 20,050 named targets reads their stamps in many statements. It is
    stopped part way through its reads (at its Nth read of the store), a second
    process stamps every target anew and exits 0, and the check goes on: it answers
    every target by the basis it started under, none by the new one (before the
    reads shared one snapshot, the first chunk came back stale and the rest current)."""
    repo, early, many = store
    stamped = repo.hostcore("stamp", *many)
    assert stamped.returncode == 0, stamped.stderr
    repo.write("CLAUDE.md", "use spaces\n")
    everything = absolute(repo, early + many)

    log = tmp_path / "strace.log"
    reader = traced(repo, repo.root / FILE, f"signal=SIGSTOP:when={MID_READS}", "check",
                    "--json", *early, *many, log=log, call="pread64")
    try:
        tracee = stopped(reader, log)
        writer = repo.hostcore("stamp", *early, *many)
        assert writer.returncode == 0, writer.stderr
        os.kill(tracee, signal.SIGCONT)
        out, err = reader.communicate(timeout=DEADLINE)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 1, err
    answered = {t["path"]: (t["status"], tuple(t["moved"])) for t in json.loads(out)["targets"]}
    assert answered == {p: ("stale", ("context",)) for p in everything}
    assert statuses(repo) == (0, {p: ("current", ()) for p in everything})


def stopped(writer: subprocess.Popen[str], log: Path) -> int:
    """The pid of ``writer``'s (or a reader's) hostcore process once strace has
    stopped it."""
    deadline = time.monotonic() + DEADLINE
    while True:
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines:
            if "--- stopped by SIGSTOP ---" in line:
                return int(line.split()[0])
        assert writer.poll() is None, "the writer ended before it was stopped"
        assert time.monotonic() < deadline, "the writer never reached its write"
        time.sleep(0.02)
