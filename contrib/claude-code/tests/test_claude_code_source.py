"""The Claude Code transcript source against fixture files in the real format.

Format: ``~/.claude/projects/<slug>/<sessionId>.jsonl``, one JSON object per line.
Conversation lines carry ``parentUuid``, ``isSidechain``, ``userType``, ``cwd``,
``sessionId``, ``version``, ``gitBranch``, ``type``, ``message``, ``uuid`` and
``timestamp`` in that order; ``summary`` and ``file-history-snapshot`` lines carry
no ``cwd``. Taken from transcripts documented in public repositories:
Lewik/gromozeka ``docs/session-storage.md``, jwhenry28/claude-code-visualizer
``docs/claude-code-project-notes.md`` and yongkangc/claude-ui
``knowledge/example-cc-config-folder.md`` (Claude Code 1.0.x to 2.0.x).
"""

from __future__ import annotations

import json
from pathlib import Path

import hostcore_claude_code.plugin as claude_plugin
import pytest
from hostcore_claude_code.source import EVENT, PATTERNS, parse_line

from hostcore.evidence import transcripts
from hostcore.evidence.transcripts import JsonlFiles, TranscriptSource


def conversation_line(cwd: str, session: str, uuid: str, *, type_: str = "user",
                      text: str = "hello", ts: str = "2025-07-28T22:54:41.466Z",
                      branch: str = "main") -> dict:
    return {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": "2.0.61", "gitBranch": branch, "type": type_,
            "message": {"role": type_, "content": text}, "uuid": uuid, "timestamp": ts}


def write_lines(path: Path, lines: list, mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path) -> Path:
    folder = tmp_path / "work" / "repo"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n"
        '[remote "upstream"]\n\turl = https://github.com/other/fork.git\n'
        '[remote "origin"]\n\turl = https://alice:s3cret@github.com/acme/widgets.git\n'
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        '[branch "main"]\n\tremote = origin\n')
    return folder


def session_file(home: Path, session: str, slug: str = "-work-repo") -> Path:
    return home / ".claude" / "projects" / slug / f"{session}.jsonl"


def make(make_host, home: Path):
    return make_host(claude_plugin, config={"plugins": {"claude-code": {"home": str(home)}}})


def exported(host) -> list[tuple]:
    return list(host.seam.read_rows_since_sync(
        "claude-code", 0, ["session_id", "ts", "directory", "git_remote", "payload", "key"]))


def test_conversation_lines_become_rows_and_others_are_counted(make_host, home, repo,
                                                               collected_events):
    write_lines(session_file(home, "s-1"), [
        {"type": "summary", "summary": "Build fixes", "leafUuid": "u2"},
        {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}},
        conversation_line(str(repo), "s-1", "u1"),
        conversation_line(str(repo), "s-1", "u2", type_="assistant", branch=""),
    ])
    host = make(make_host, home)
    assert host.tick().ok
    assert exported(host) == [
        (1, "s-1", "2025-07-28T22:54:41.466000Z", str(repo), "https://github.com/acme/widgets.git",
         '{"type":"user","branch":"main"}', "s-1:u1"),
        (2, "s-1", "2025-07-28T22:54:41.466000Z", str(repo), "https://github.com/acme/widgets.git",
         '{"type":"assistant"}', "s-1:u2"),
    ]
    (event,) = collected_events.named(EVENT)
    assert event.attributes == {"files": 1, "lines": 4, "rows": 2, "malformed": 0,
                                "oversized": 0, "unreadable": 0, "no_cwd": 2,
                                "unencodable": 0, "parse_error": 0, "outside": 0,
                                "missing_home": False}


def test_reading_is_incremental_and_waits_for_a_line_to_be_finished(make_host, home, repo):
    path = session_file(home, "s-1")
    write_lines(path, [conversation_line(str(repo), "s-1", "u1")])
    host = make(make_host, home)
    host.tick()
    partial = json.dumps(conversation_line(str(repo), "s-1", "u2"))
    with path.open("a") as handle:
        handle.write(partial[:40])            # Claude Code is mid-write
    host.tick()
    assert len(exported(host)) == 1
    with path.open("a") as handle:
        handle.write(partial[40:] + "\n")
    host.tick()
    assert [r[-1] for r in exported(host)] == ["s-1:u1", "s-1:u2"]
    cursor = json.loads(host.store.source_cursor("claude-code"))
    assert cursor["files"]["projects/-work-repo/s-1.jsonl"]["offset"] == path.stat().st_size


def test_running_twice_adds_nothing(make_host, home, repo):
    write_lines(session_file(home, "s-1"), [conversation_line(str(repo), "s-1", "u1")])
    host = make(make_host, home)
    host.tick()
    version = host.store.partitions()
    host.tick()
    assert host.store.partitions() == version


def test_malformed_and_truncated_lines_are_counted_and_skipped(make_host, home, repo):
    write_lines(session_file(home, "s-1"), [
        conversation_line(str(repo), "s-1", "u1"),
        '{"parentUuid": null, "cwd": "/cut/short',          # a torn write, then more
        "[1, 2, 3]",
        '{"cwd": 42, "type": "user"}',
        conversation_line(str(repo), "s-1", "u3"),
    ])
    host = make(make_host, home)
    host.tick()
    assert [r[-1] for r in exported(host)] == ["s-1:u1", "s-1:u3"]
    assert host.sources[0].status()["last_malformed"] == 3


def test_content_lists_give_their_tool_blocks_and_odd_ones_keep_their_rows(make_host, home,
                                                                          repo):
    def with_content(uuid: str, content: object) -> dict:
        line = conversation_line(str(repo), "s-1", uuid, type_="assistant")
        line["message"]["content"] = content
        return line

    write_lines(session_file(home, "s-1"), [
        with_content("u1", [{"type": "text", "text": "no tool here"}]),
        with_content("u2", [{"type": "text", "text": "x"},
                            {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]),
        with_content("u3", [{"type": "tool_result", "tool_use_id": "t", "is_error": True,
                             "content": "failed"}]),
        with_content("u4", ["a list of text", 7, None]),  # no blocks: a row all the same
        with_content("u5", ["tool_use", {"type": "tool_use", "name": "Bash"}]),  # malformed
        with_content("u6", {"type": "tool_use", "name": "Bash"}),  # no list: malformed
        with_content("u7", 42),  # names no tool block: a row
    ])
    host = make(make_host, home)
    host.tick()
    assert [(r[-1], json.loads(r[5])) for r in exported(host)] == [
        ("s-1:u1", {"type": "assistant", "branch": "main"}),
        ("s-1:u2", {"type": "assistant", "branch": "main", "tools": ["Bash"]}),
        ("s-1:u3", {"type": "assistant", "branch": "main",
                    "tool_results": {"ok": 0, "error": 1}}),
        ("s-1:u4", {"type": "assistant", "branch": "main"}),
        ("s-1:u7", {"type": "assistant", "branch": "main"}),
    ]
    assert host.sources[0].status()["last_malformed"] == 2


def test_a_huge_line_is_capped_counted_and_skipped(home, repo, tmp_path):
    write_lines(session_file(home, "s-1"), [
        conversation_line(str(repo), "s-1", "u1", text="x" * 50_000),
        conversation_line(str(repo), "s-1", "u2"),
    ])
    events = []
    source = TranscriptSource(name="claude-code", folder=home / ".claude", patterns=PATTERNS,
                              parse=parse_line, event=EVENT,
                              emit=lambda name, **attrs: events.append(attrs),
                              files=JsonlFiles(max_line_bytes=4096))
    batch = source.read(None)
    assert [r.key for r in batch.rows] == ["s-1:u2"]
    assert events[0]["oversized"] == 1


def test_a_missing_home_gives_no_rows_and_says_so(make_host, tmp_path, collected_events):
    host = make(make_host, tmp_path / "nobody")
    report = host.tick()
    assert report.ok and report.steps[0].counts["rows"] == 0
    assert collected_events.named(EVENT)[0].attributes["missing_home"] is True


def test_an_unreadable_file_is_counted_and_the_others_ingest(make_host, home, repo,
                                                             monkeypatch):
    locked = session_file(home, "s-locked")
    write_lines(locked, [conversation_line(str(repo), "s-locked", "u9")])
    write_lines(session_file(home, "s-1"), [conversation_line(str(repo), "s-1", "u1")])
    # Root reads a mode-000 file, so the refusal is made here, where files are opened.
    original_open = transcripts.open_transcript

    def open_unless_locked(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return original_open(path)

    monkeypatch.setattr(transcripts, "open_transcript", open_unless_locked)
    host = make(make_host, home)
    host.tick()
    assert [r[-1] for r in exported(host)] == ["s-1:u1"]
    assert host.sources[0].status()["last_unreadable"] == 1
    monkeypatch.setattr(transcripts, "open_transcript", original_open)
    host.tick()                                  # readable again: picked up
    assert [r[-1] for r in exported(host)] == ["s-1:u1", "s-locked:u9"]


def test_evidence_stays_when_a_transcript_is_deleted(make_host, home, repo):
    path = session_file(home, "s-1")
    write_lines(path, [conversation_line(str(repo), "s-1", "u1")])
    host = make(make_host, home)
    host.tick()
    path.unlink()                                # Claude Code's 30-day cleanup
    host.tick()
    assert len(exported(host)) == 1
    assert json.loads(host.store.source_cursor("claude-code"))["files"] == {}


def test_a_rewritten_file_is_read_again_without_duplicates(make_host, home, repo):
    path = session_file(home, "s-1")
    write_lines(path, [conversation_line(str(repo), "s-1", "u1"),
                       conversation_line(str(repo), "s-1", "u2")])
    host = make(make_host, home)
    host.tick()
    # Replaced in place by a longer file: the same inode and a larger size, so only
    # the digest of its first bytes tells it apart.
    write_lines(path, [{"type": "summary", "summary": "Resumed", "leafUuid": "u3"},
                       conversation_line(str(repo), "s-1", "u0"),
                       conversation_line(str(repo), "s-1", "u1"),
                       conversation_line(str(repo), "s-1", "u2"),
                       conversation_line(str(repo), "s-1", "u3")])
    host.tick()
    assert [r[-1] for r in exported(host)] == ["s-1:u1", "s-1:u2", "s-1:u0", "s-1:u3"]
    # Truncated: shorter than what was read, so read again from the start.
    write_lines(path, [conversation_line(str(repo), "s-1", "u4")])
    host.tick()
    assert [r[-1] for r in exported(host)][-1] == "s-1:u4"


def test_windows_paths_are_kept_and_give_no_remote(make_host, home):
    write_lines(session_file(home, "s-w", slug="C--Users-me-repo"), [
        conversation_line(r"C:\Users\me\repo", "s-w", "u1")])
    host = make(make_host, home)
    host.tick()
    (row,) = exported(host)
    assert row[3:5] == (r"C:\Users\me\repo", "")


def test_subagent_transcripts_are_read(make_host, home, repo):
    write_lines(home / ".claude" / "projects" / "-work-repo" / "s-1" / "subagents" /
                "agent-a1.jsonl", [conversation_line(str(repo), "s-1", "a1")])
    host = make(make_host, home)
    host.tick()
    assert [r[-1] for r in exported(host)] == ["s-1:a1"]


def test_a_worktree_finds_the_remote_of_its_main_repository(make_host, home, repo, tmp_path):
    worktree = tmp_path / "work" / "repo-feature"
    gitdir = repo / ".git" / "worktrees" / "repo-feature"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    write_lines(session_file(home, "s-2"), [conversation_line(str(worktree / "src"), "s-2",
                                                              "u1")])
    host = make(make_host, home)
    host.tick()
    assert exported(host)[0][4] == "https://github.com/acme/widgets.git"


def test_the_home_folder_comes_from_the_plugin_table_or_the_environment(tmp_path):
    from hostcore_claude_code.plugin import ClaudeCodeConfig, claude_folder

    assert claude_folder(ClaudeCodeConfig(home=str(tmp_path)), {}) == tmp_path / ".claude"
    assert claude_folder(ClaudeCodeConfig(), {"CLAUDE_CONFIG_DIR": str(tmp_path / "c")}) == (
        tmp_path / "c")
    assert claude_folder(ClaudeCodeConfig(), {}) == Path.home() / ".claude"
