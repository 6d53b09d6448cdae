"""Hostile input through ``hostcore run --once``: no line wedges a source, a failing
source shows in ``status`` and in the exit status, reading a repository's config is
bounded, symlinks do not lead reads out of the transcript folder, years before 1000
purge like any other, and temp files a killed run left are cleaned at the next start.

Everything runs the real CLI in a subprocess against real files.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore import hookimpl
from hostcore.evidence.rows import EvidenceRow, SourceBatch

SOURCES = "claude-code,codex"
# The most memory (address space) a hostcore run under test may take: a read of
# /dev/zero would pass it at once, and fail the test instead of the machine.
MEMORY_CAP_BYTES = 2 << 30


def hostcore(root: Path, *args: str, plugins: str = SOURCES,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": plugins}
    env.pop("HOSTCORE_ROOT", None)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))

    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL, preexec_fn=cap_memory)


def make_root(tmp_path: Path, home: Path, extra: str = "") -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n{extra}\n[plugins.codex]\nhome = "{home}"\n')
    return root


def claude_line(cwd: str, uuid: str, session: str = "c-1",
                ts: str = "2025-07-28T22:54:41.466Z") -> dict[str, object]:
    return {"type": "user", "cwd": cwd, "sessionId": session, "uuid": uuid, "timestamp": ts,
            "gitBranch": "main"}


def write_jsonl(path: Path, lines: list[object], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def claude_file(home: Path, session: str, slug: str = "-work") -> Path:
    return home / ".claude" / "projects" / slug / f"{session}.jsonl"


def codex_file(home: Path, name: str) -> Path:
    return home / ".codex" / "sessions" / "2025" / "09" / "14" / f"rollout-{name}.jsonl"


def codex_header(session: str, cwd: str, padding: int = 0) -> dict[str, object]:
    payload: dict[str, object] = {"id": session, "cwd": cwd}
    if padding:
        payload["instructions"] = "x" * padding  # after the cwd, as Codex writes it
    return {"timestamp": "2025-09-14T10:00:00.000Z", "type": "session_meta",
            "payload": payload}


def codex_item(n: int) -> dict[str, object]:
    return {"timestamp": f"2025-09-14T10:00:{n % 60:02d}.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"n": n}]}}


def rows_by_partition(root: Path) -> dict[str, int]:
    db = sqlite3.connect(root / "store.sqlite3")
    try:
        return dict(db.execute("SELECT p.name, COUNT(*) FROM evidence e JOIN partitions p "
                               "ON p.id = e.part GROUP BY p.name"))
    finally:
        db.close()


def ingest_status(root: Path) -> dict[str, dict[str, object]]:
    result = hostcore(root, "status", "--json")
    assert result.returncode == 0, result.stderr
    sources: dict[str, dict[str, object]] = json.loads(
        result.stdout)["components"]["worker"]["ingest"]["sources"]
    return sources


def test_one_bad_line_never_stops_its_source_or_the_files_after_it(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    # A worktree whose commondir is not UTF-8.
    gitdir = work / "main" / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_bytes(b"\xff\xfe/../..\n")
    (work / "wt").mkdir()
    (work / "wt" / ".git").write_text(f"gitdir: {gitdir}\n")
    write_jsonl(claude_file(home, "a"), [
        claude_line("/w/a", "u1", "a"),
        claude_line("/w/a", "u2", "a", ts="9999-12-31T23:59:59-01:00"),  # overflows in UTC
        claude_line("/w/a", "u3", "a"),
    ])
    write_jsonl(claude_file(home, "b"), [claude_line(str(work / "wt"), f"u{n}", "b")
                                         for n in range(3)])
    # A header over the 1 MiB line cap whose cwd holds a lone surrogate.
    write_jsonl(codex_file(home, "bad"), [codex_header("x-bad", "/w/\ud800", padding=2 << 20),
                                          codex_item(1), codex_item(2)])
    write_jsonl(codex_file(home, "good"), [codex_header("x-good", "/w/c"), codex_item(3)])
    root = make_root(tmp_path, home)

    first = hostcore(root, "run", "--once")
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert rows_by_partition(root) == {"claude-code": 6, "codex": 2}
    health = ingest_status(root)
    # The header is counted once (oversized); its cwd could not be kept, so the
    # lines after it have none.
    assert health["codex"]["skipped"] == {"oversized": 1, "no_cwd": 2}
    assert health["codex"]["failures"] == 0 and health["claude-code"]["failures"] == 0

    # 100 good lines written meanwhile, then the files rotate away: none is lost.
    write_jsonl(claude_file(home, "a"), [claude_line("/w/a", f"v{n}", "a") for n in range(100)],
                mode="a")
    write_jsonl(codex_file(home, "good"), [codex_item(n) for n in range(10, 20)], mode="a")
    second = hostcore(root, "run", "--once")
    assert second.returncode == 0, second.stderr
    assert rows_by_partition(root) == {"claude-code": 106, "codex": 12}


class Flaky:
    """A source that raises until ``fixed`` exists, then hands out three rows."""

    name = "flaky"

    def __init__(self, fixed: Path) -> None:
        self.fixed = fixed

    def read(self, cursor: str | None) -> SourceBatch:
        if not self.fixed.exists():
            raise KeyError("/home/someone/private/path")
        start = int(cursor or 0)
        rows = [EvidenceRow(partition="flaky", source_id="flaky", key=str(n))
                for n in range(start, 3)]
        return SourceBatch(rows, "3")


def test_a_failing_source_shows_in_status_and_the_exit_status_and_is_retried(
        hostcore_cli, register_plugin, tmp_path):
    fixed = tmp_path / "fixed"

    class Plugin:
        @hookimpl
        def hostcore_sources(self, host):
            return Flaky(fixed)

    register_plugin(Plugin())
    failed = hostcore_cli("run", "--once")
    assert failed.exit_code == 1
    assert "'flaky' (raised: KeyError)" in failed.stderr
    assert "/home/someone" not in failed.stderr
    status = json.loads(hostcore_cli("status", "--json").stdout)
    flaky = status["components"]["worker"]["ingest"]["sources"]["flaky"]
    assert (flaky["failures"], flaky["last_error"]) == (1, "raised: KeyError")
    # The screen names the failing source and its error on one line, at any width.
    wide = hostcore_cli("status", env={"COLUMNS": "200"}).stdout
    (line,) = [ln for ln in wide.splitlines() if ln.startswith("source flaky")]
    assert " failed " in line and "raised: KeyError" in line
    assert "/home/someone" not in wide

    fixed.touch()
    recovered = hostcore_cli("run", "--once", "--json")
    assert recovered.exit_code == 0, recovered.stderr
    (ingest,) = [s for s in json.loads(recovered.stdout.splitlines()[-1])["steps"]
                 if s["name"] == "ingest"]
    assert ingest["counts"]["rows"] == 3
    status = json.loads(hostcore_cli("status", "--json").stdout)
    flaky = status["components"]["worker"]["ingest"]["sources"]["flaky"]
    assert (flaky["failures"], flaky["last_error"]) == (0, "raised: KeyError")


@pytest.mark.parametrize("trap", ["config is /dev/zero", "config is a FIFO",
                                  "commondir is /dev/zero", "gitdir file is a FIFO",
                                  "config over the cap"])
def test_a_repository_config_that_is_not_a_small_file_means_no_remote(tmp_path, trap):
    home, repo = tmp_path / "home", tmp_path / "work" / "repo"
    dot_git = repo / ".git"
    dot_git.mkdir(parents=True)
    if trap == "config is /dev/zero":
        (dot_git / "config").symlink_to("/dev/zero")
    elif trap == "config is a FIFO":
        os.mkfifo(dot_git / "config")
    elif trap == "config over the cap":
        (dot_git / "config").write_text('[remote "origin"]\n\turl = git@h:o/r.git\n'
                                        + "# padding\n" * 30_000)
    else:
        dot_git.rmdir()
        gitdir = tmp_path / "gitdir"
        gitdir.mkdir()
        if trap == "commondir is /dev/zero":
            (gitdir / "commondir").symlink_to("/dev/zero")
            dot_git.write_text(f"gitdir: {gitdir}\n")
        else:
            os.mkfifo(dot_git)
    write_jsonl(claude_file(home, "s"), [claude_line(str(repo / "src"), "u1", "s")])
    root = make_root(tmp_path, home)
    result = hostcore(root, "run", "--once", timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    db = sqlite3.connect(root / "store.sqlite3")
    try:
        assert db.execute("SELECT git_remote FROM evidence").fetchall() == [("",)]
    finally:
        db.close()


def test_symlinks_leading_out_of_the_transcript_folder_are_skipped_unless_followed(
        make_host, tmp_path):
    import hostcore_claude_code.plugin as claude_plugin

    home = tmp_path / "home"
    outside = tmp_path / "elsewhere" / "project"
    write_jsonl(outside / "s-out.jsonl", [claude_line("/w/out", "u1", "s-out")])
    write_jsonl(claude_file(home, "s-in"), [claude_line("/w/in", "u1", "s-in")])
    projects = home / ".claude" / "projects"
    (projects / "-linked").symlink_to(outside)                    # a folder leading out
    (projects / "-work" / "s-copy.jsonl").symlink_to(outside / "s-out.jsonl")  # a file
    (projects / "-alias").symlink_to(projects / "-work")          # stays inside: read

    def keys(follow: bool) -> set[str]:
        table = {"home": str(home), "follow_symlinks": follow}
        host = make_host(claude_plugin, config={"plugins": {"claude-code": table}})
        assert host.tick().ok
        found = {r[1] for r in host.seam.read_rows_since_sync(None, 0, ["key"])}
        if not follow:
            # -linked, -work/s-copy.jsonl and the same link seen through -alias.
            assert host.sources[0].status()["last_outside"] == 3
        return found

    assert keys(follow=False) == {"s-in:u1"}
    assert keys(follow=True) == {"s-in:u1", "s-out:u1"}


def test_years_before_1000_are_purged_by_before(tmp_path):
    home = tmp_path / "home"
    write_jsonl(claude_file(home, "s"), [
        claude_line("/w/a", "u1", "s", ts="0999-12-31T23:59:59Z"),
        claude_line("/w/a", "u2", "s", ts="0500-06-01T00:00:00+01:00"),
        claude_line("/w/a", "u3", "s", ts="1999-01-01T00:00:00Z"),
    ])
    root = make_root(tmp_path, home)
    assert hostcore(root, "run", "--once").returncode == 0
    result = hostcore(root, "purge", "--before", "1000-01-01T00:00:00Z", "--yes")
    assert result.returncode == 0, result.stderr
    db = sqlite3.connect(root / "store.sqlite3")
    try:
        assert db.execute("SELECT key FROM evidence").fetchall() == [("s:u3",)]
    finally:
        db.close()


def test_temp_files_of_a_killed_writer_are_removed_when_run_starts(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    root = make_root(tmp_path, tmp_path / "home")
    plugin_dir = root / "plugins" / "some-plugin"
    plugin_dir.mkdir(parents=True, mode=0o700)
    stale = [root / f".last-tick.json.{dead}.k2j4h5g6.tmp",
             plugin_dir / f".state.v2.json.{dead}.a1b2c3d4.tmp"]
    live = plugin_dir / f".state.json.{os.getpid()}.zz99yy88.tmp"
    other = root / "notes.tmp"
    for path in [*stale, live, other]:
        path.write_text("half a write")
    assert hostcore(root, "run", "--once").returncode == 0
    assert [p.exists() for p in stale] == [False, False]
    assert live.exists() and other.exists()
