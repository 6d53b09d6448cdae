"""The evidence CLI: ``evidence``, ``purge``, ``policy``, and ``run --once`` ingesting
real transcript sources installed as entry points (real subprocesses throughout).

Transcript fixtures follow the real formats; see the contrib sources' tests for
where each format was taken from.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.evidence.store import EvidenceRow, Store

CONTRIB_SOURCES = "hostcore-claude-code,hostcore-codex"


def hostcore(root: Path, *args: str, plugins: str = "", stdin: str | None = None,
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": plugins}
    env.pop("HOSTCORE_ROOT", None)
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def on_terminal(root: Path, *args: str, answer: str) -> tuple[int, str]:
    """Run hostcore with a pseudo-terminal as stdin/stdout and type ``answer``."""
    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": ""}
    pid, fd = pty.fork()
    if pid == 0:  # the child: become hostcore
        os.execvpe(sys.executable, [sys.executable, "-m", "hostcore", "--root", str(root),
                                    *args], env)
    output = b""
    answered = False
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"[y/N]" in output:
            os.write(fd, answer.encode() + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


@pytest.fixture
def seeded(tmp_path) -> Path:
    root = tmp_path / "root"
    store = Store(root / "store.sqlite3")
    store.append([
        EvidenceRow(partition="claude-code", source_id="claude-code", session_id="s1",
                    directory="/work/repo", ts="2025-01-01T00:00:00Z"),
        EvidenceRow(partition="claude-code", source_id="claude-code", session_id="s2",
                    directory="/work/other", ts="2025-03-01T00:00:00Z"),
        EvidenceRow(partition="codex", source_id="codex", session_id="s3",
                    directory="/work/repo/sub", ts="2025-02-01T00:00:00Z"),
    ])
    store.close()
    return root


def evidence(root: Path) -> dict:
    result = hostcore(root, "evidence", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_evidence_reports_partitions_versions_and_counts(seeded):
    report = evidence(seeded)
    assert report["rows"] == 3 and report["head_position"] == 3
    assert {name: p["row_count"] for name, p in report["partitions"].items()} == {
        "claude-code": 2, "codex": 1}
    for part in report["partitions"].values():
        assert part["version"] == f"{part['epoch']}:{part['row_count']}"
    text = hostcore(seeded, "evidence")
    assert "claude-code" in text.stdout and "3 row(s) in 2 partition(s)" in text.stdout


def test_purge_refuses_without_a_terminal_and_without_yes(seeded):
    result = hostcore(seeded, "purge", "--dir", "/work/repo")
    assert result.returncode == 2
    assert "no terminal" in result.stderr and "--yes" in result.stderr
    assert evidence(seeded)["rows"] == 3


def test_purge_with_yes_deletes_and_prints_counts_only(seeded):
    before = evidence(seeded)["partitions"]
    result = hostcore(seeded, "purge", "--dir", "/work/repo", "--yes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "deleted 2 row(s) (claude-code: 1, codex: 1)"
    after = evidence(seeded)["partitions"]
    assert after["claude-code"]["row_count"] == 1
    assert after["claude-code"]["epoch"] != before["claude-code"]["epoch"]


def test_purge_json_and_dry_run(seeded):
    result = hostcore(seeded, "purge", "--before", "2025-02-15", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"dry_run": True, "rows": 2,
                                         "partitions": {"claude-code": 1, "codex": 1}}
    assert evidence(seeded)["rows"] == 3
    result = hostcore(seeded, "purge", "--source", "codex", "--yes", "--json")
    assert json.loads(result.stdout)["partitions"] == {"codex": 1}


def test_purge_asks_on_a_terminal_and_honours_the_answer(seeded):
    code, output = on_terminal(seeded, "purge", "--session", "s1", answer="n")
    assert code == 1 and "Delete 1 row(s) from 1 partition(s)?" in output
    assert evidence(seeded)["rows"] == 3
    code, output = on_terminal(seeded, "purge", "--session", "s1", answer="y")
    assert code == 0 and "deleted 1 row(s)" in output
    assert evidence(seeded)["rows"] == 2


def test_purge_usage_errors_exit_2(seeded):
    assert hostcore(seeded, "purge", "--yes").returncode == 2
    bad = hostcore(seeded, "purge", "--before", "last tuesday", "--yes")
    assert bad.returncode == 2 and "ISO-8601" in bad.stderr


def test_policy_commands_change_entries_opt_outs_and_the_fingerprint(tmp_path):
    root = tmp_path / "root"
    first = json.loads(hostcore(root, "policy", "show", "--json").stdout)
    assert first["entries"] == [] and first["opted_out"] == []
    assert {i["name"]: i["fingerprinted"] for i in first["inputs"]} == {
        "class-list": True, "sync-opt-out": True, "ignore-dotfiles": True}

    secret = tmp_path / "secret"
    secret.mkdir()  # policy refuses a folder that does not exist (unless --force)
    assert hostcore(root, "policy", "local-only", str(secret)).returncode == 0
    only_entry = json.loads(hostcore(root, "policy", "show", "--json").stdout)["fingerprint"]
    assert only_entry != first["fingerprint"]
    # No plugin is loaded here, so no source is known: --force records it anyway.
    assert hostcore(root, "policy", "opt-out", "--force", "codex").returncode == 0
    changed = json.loads(hostcore(root, "policy", "show", "--json").stdout)
    assert changed["entries"] == [{"directory": str(secret), "class": "local-only"}]
    assert changed["opted_out"] == ["codex"]
    assert changed["fingerprint"] != first["fingerprint"]

    hostcore(root, "policy", "opt-in", "codex")
    hostcore(root, "policy", "full", str(secret))
    hostcore(root, "policy", "local-only", str(secret))
    restored = json.loads(hostcore(root, "policy", "show", "--json").stdout)
    assert restored["opted_out"] == []
    assert restored["fingerprint"] == only_entry
    text = hostcore(root, "policy", "show").stdout
    assert f"local-only  {secret}" in text


def test_policy_local_only_then_full_then_back_restores_the_fingerprint(tmp_path):
    root, repo = tmp_path / "root", str(tmp_path / "repo")
    (tmp_path / "repo").mkdir()
    hostcore(root, "policy", "full", repo)
    original = json.loads(hostcore(root, "policy", "show", "--json").stdout)["fingerprint"]
    hostcore(root, "policy", "local-only", repo)
    hostcore(root, "policy", "full", repo)
    again = json.loads(hostcore(root, "policy", "show", "--json").stdout)["fingerprint"]
    assert again == original


def test_a_hand_broken_class_list_is_a_configuration_error(tmp_path):
    root = tmp_path / "root"
    (root / "policy").mkdir(parents=True)
    (root / "policy" / "classes.tsv").write_text("secret /x\n")
    result = hostcore(root, "policy", "show")
    assert result.returncode == 2
    assert "classes.tsv:1" in result.stderr


# -- run --once with the real transcript sources ----------------------------------


def write_transcripts(home: Path, repo: Path) -> None:
    claude = home / ".claude" / "projects" / "-work-repo"
    claude.mkdir(parents=True)
    lines = [
        {"type": "summary", "summary": "Fixing the build", "leafUuid": "u2"},
        {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": str(repo),
         "sessionId": "c-1", "version": "2.0.61", "gitBranch": "main", "type": "user",
         "message": {"role": "user", "content": "fix the build"}, "uuid": "u1",
         "timestamp": "2025-07-28T22:54:41.466Z"},
        {"parentUuid": "u1", "isSidechain": False, "userType": "external", "cwd": str(repo),
         "sessionId": "c-1", "version": "2.0.61", "gitBranch": "main", "type": "assistant",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
         "uuid": "u2", "timestamp": "2025-07-28T22:54:45.001Z"},
    ]
    (claude / "c-1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    day = home / ".codex" / "sessions" / "2025" / "09" / "14"
    day.mkdir(parents=True)
    rollout = [
        {"timestamp": "2025-09-14T10:00:00.000Z", "type": "session_meta",
         "payload": {"id": "x-1", "timestamp": "2025-09-14T10:00:00.000Z", "cwd": str(repo),
                     "originator": "codex_cli_rs", "cli_version": "0.36.0",
                     "git": {"commit_hash": "a" * 40, "branch": "main",
                             "repository_url": "https://github.com/acme/widgets.git"}}},
        {"timestamp": "2025-09-14T10:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "hello"}]}},
    ]
    (day / "rollout-2025-09-14T10-00-00-x-1.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in rollout))


def test_run_once_ingests_installed_transcript_sources_and_twice_adds_nothing(tmp_path):
    home, repo, root = tmp_path / "home", tmp_path / "work" / "repo", tmp_path / "root"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/widgets.git\n')
    write_transcripts(home, repo)
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.claude-code]\nhome = "{home}"\n\n[plugins.codex]\nhome = "{home}"\n')

    first = hostcore(root, "run", "--once", "--json", plugins=CONTRIB_SOURCES)
    assert first.returncode == 0, first.stderr
    (ingest,) = [s for s in json.loads(first.stdout)["steps"] if s["name"] == "ingest"]
    # The summary line of the Claude transcript has no cwd: counted, no row.
    assert ingest["counts"] == {"sources": 2, "failed": 0, "skipped": 0, "rows": 4,
                                "lines_skipped": 1}
    report = evidence(root)
    assert {n: p["row_count"] for n, p in report["partitions"].items()} == {
        "claude-code": 2, "codex": 2}

    second = hostcore(root, "run", "--once", plugins=CONTRIB_SOURCES)
    assert second.returncode == 0, second.stderr
    again = evidence(root)
    assert again == report

    store = Store(root / "store.sqlite3")
    try:
        from hostcore.evidence.policy import Policy
        from hostcore.evidence.seam import ExportSeam

        remotes = {r[1:] for r in ExportSeam(store, Policy([])).read_rows_since_sync(
            None, 0, ["source_id", "git_remote"])}
    finally:
        store.close()
    assert remotes == {("claude-code", "git@github.com:acme/widgets.git"),
                       ("codex", "https://github.com/acme/widgets.git")}
