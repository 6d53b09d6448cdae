"""The Codex CLI rollout source against fixture files in the real format.

Format: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``; every line is
``{"timestamp", "type", "payload"}`` (``RolloutLine`` with a flattened
``RolloutItem`` tagged ``type``/``payload``: ``session_meta``, ``response_item``,
``compacted``, ``turn_context``, ``event_msg``). The first line's payload is a
``SessionMetaLine``: ``id``, ``timestamp``, ``cwd``, ``originator``,
``cli_version``, (``instructions``), then an optional ``git`` object with
``commit_hash``, ``branch`` and ``repository_url``. Taken from the Codex source,
``codex-rs/protocol/src/protocol.rs`` in openai/codex (``SessionMeta``,
``SessionMetaLine``, ``RolloutItem``), as quoted in public repositories, and from
kvsankar/agent-history ``docs/codex-format.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import hostcore_codex.plugin as codex_plugin
import pytest
from hostcore_codex.source import EVENT, PATTERNS, parse_line

from hostcore.evidence.transcripts import JsonlFiles, TranscriptSource


def meta(cwd: str | None, session: str = "0199-aaaa", *, remote: str | None = None,
         instructions: str = "") -> dict:
    payload: dict = {"id": session, "timestamp": "2025-09-14T10:00:00.000Z",
                     "originator": "codex_cli_rs", "cli_version": "0.36.0"}
    if cwd is not None:
        payload["cwd"] = cwd
    if instructions:
        payload["instructions"] = instructions
    if remote is not None:
        payload["git"] = {"commit_hash": "a" * 40, "branch": "main", "repository_url": remote}
    return {"timestamp": "2025-09-14T10:00:00.000Z", "type": "session_meta",
            "payload": payload}


def item(text: str = "hello", ts: str = "2025-09-14T10:00:01.000Z") -> dict:
    return {"timestamp": ts, "type": "response_item",
            "payload": {"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": text}]}}


def turn_context(cwd: str) -> dict:
    return {"timestamp": "2025-09-14T10:05:00.000Z", "type": "turn_context",
            "payload": {"cwd": cwd, "approval_policy": "on-request", "model": "gpt-5"}}


def rollout(home: Path, name: str = "rollout-2025-09-14T10-00-00-0199-aaaa.jsonl") -> Path:
    return home / ".codex" / "sessions" / "2025" / "09" / "14" / name


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
        '[remote "origin"]\n\turl = git@github.com:acme/from-config.git\n')
    return folder


def make(make_host, home: Path):
    return make_host(codex_plugin, config={"plugins": {"codex": {"home": str(home)}}})


def exported(host) -> list[tuple]:
    return list(host.seam.read_rows_since_sync(
        "codex", 0, ["session_id", "ts", "directory", "git_remote", "payload"]))


def test_every_line_after_the_header_is_evidence_with_the_header_remote(
        make_host, home, repo, collected_events):
    write_lines(rollout(home), [
        meta(str(repo), remote="https://x-access-token:abc@github.com/acme/widgets.git"),
        item(),
        {"timestamp": "2025-09-14T10:00:02.000Z", "type": "event_msg",
         "payload": {"type": "token_count", "info": None}},
        {"timestamp": "2025-09-14T10:00:03.000Z", "type": "a_type_from_the_future",
         "payload": {"anything": [1, 2]}},
    ])
    host = make(make_host, home)
    assert host.tick().ok
    rows = exported(host)
    assert [r[5] for r in rows] == ['{"type":"session_meta"}', '{"type":"response_item"}',
                                    '{"type":"event_msg"}', '{"type":"a_type_from_the_future"}']
    assert {r[1:5] for r in rows} >= {("0199-aaaa", "2025-09-14T10:00:01.000000Z", str(repo),
                                       "https://github.com/acme/widgets.git")}
    assert {r[4] for r in rows} == {"https://github.com/acme/widgets.git"}
    (event,) = collected_events.named(EVENT)
    assert event.attributes["rows"] == 4 and event.attributes["malformed"] == 0


def test_without_a_repository_url_the_remote_comes_from_the_git_config(make_host, home, repo):
    write_lines(rollout(home), [meta(str(repo)), item()])
    host = make(make_host, home)
    host.tick()
    assert {r[4] for r in exported(host)} == {"git@github.com:acme/from-config.git"}


def test_turn_context_moves_the_session_to_another_directory(make_host, home, repo, tmp_path):
    elsewhere = str(tmp_path / "elsewhere")
    write_lines(rollout(home), [meta(str(repo)), item(), turn_context(elsewhere), item("x")])
    host = make(make_host, home)
    host.tick()
    assert [r[3] for r in exported(host)] == [str(repo), str(repo), elsewhere, elsewhere]


def test_a_later_read_resumes_mid_file_with_the_header_from_the_cursor(make_host, home, repo):
    path = rollout(home)
    write_lines(path, [meta(str(repo), remote="https://github.com/acme/w.git"), item()])
    host = make(make_host, home)
    host.tick()
    write_lines(path, [item("more", ts="2025-09-14T11:00:00Z")], mode="a")
    host.tick()
    last = exported(host)[-1]
    assert last[1:5] == ("0199-aaaa", "2025-09-14T11:00:00.000000Z", str(repo),
                         "https://github.com/acme/w.git")
    host.tick()
    assert len(exported(host)) == 3


def test_a_header_over_the_line_cap_still_gives_session_cwd_and_remote(home, repo):
    write_lines(rollout(home), [meta(str(repo), instructions="x" * 10_000,
                                     remote="https://github.com/acme/big.git"), item()])
    events = []
    source = TranscriptSource(name="codex", folder=home / ".codex", patterns=PATTERNS,
                              parse=parse_line, event=EVENT,
                              emit=lambda name, **attrs: events.append(attrs),
                              files=JsonlFiles(max_line_bytes=1024))
    batch = source.read(None)
    assert events[0]["oversized"] == 1
    assert [(r.session_id, r.directory, r.git_remote) for r in batch.rows] == [
        ("0199-aaaa", str(repo), "git@github.com:acme/from-config.git")]


def test_lines_before_a_header_with_a_cwd_are_counted_not_stored(make_host, home):
    legacy = rollout(home, "rollout-2025-01-01-legacy.jsonl")
    write_lines(legacy, [{"id": "legacy", "timestamp": "2025-01-01T00:00:00Z",
                          "instructions": ""},
                         {"type": "message", "role": "user", "content": []}])
    write_lines(rollout(home, "rollout-no-cwd.jsonl"), [meta(None), item()])
    host = make(make_host, home)
    assert host.tick().ok
    assert exported(host) == []
    assert host.sources[0].status()["last_no_cwd"] == 4


def test_malformed_lines_and_a_torn_last_line_are_skipped(make_host, home, repo):
    path = rollout(home)
    write_lines(path, [meta(str(repo)), "{not json", '{"type": "response_item", "payload": 7',
                       '{"type": "session_meta", "payload": {"cwd": 3}}', item()])
    with path.open("a") as handle:
        handle.write('{"timestamp": "2025-09-14T10:09:00Z", "type": "respo')
    host = make(make_host, home)
    host.tick()
    assert len(exported(host)) == 2
    assert host.sources[0].status()["last_malformed"] == 3


def test_a_missing_home_gives_no_rows(make_host, tmp_path, collected_events):
    host = make(make_host, tmp_path / "no-such-home")
    assert host.tick().ok
    assert collected_events.named(EVENT)[0].attributes["missing_home"] is True


def test_an_archived_session_keeps_its_evidence_and_moving_it_back_adds_nothing(
        make_host, home, repo):
    path = rollout(home)
    write_lines(path, [meta(str(repo)), item()])
    host = make(make_host, home)
    host.tick()
    archived = home / ".codex" / "archived_sessions" / path.name
    archived.parent.mkdir(parents=True)
    path.rename(archived)
    host.tick()
    assert len(exported(host)) == 2
    archived.rename(rollout(home, "rollout-restored.jsonl"))
    host.tick()
    assert len(exported(host)) == 2
    assert host.store.head_position() == 2


def test_windows_cwd_is_kept_as_recorded(make_host, home):
    write_lines(rollout(home), [meta(r"C:\Users\me\widgets"), item()])
    host = make(make_host, home)
    host.tick()
    assert {r[3:5] for r in exported(host)} == {(r"C:\Users\me\widgets", "")}


def test_the_home_folder_comes_from_the_plugin_table_or_the_environment(tmp_path):
    from hostcore_codex.plugin import CodexConfig, codex_folder

    assert codex_folder(CodexConfig(home=str(tmp_path)), {}) == tmp_path / ".codex"
    assert codex_folder(CodexConfig(), {"CODEX_HOME": str(tmp_path / "c")}) == tmp_path / "c"
