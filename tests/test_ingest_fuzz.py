"""Fuzz: arbitrary JSON values in every field a transcript source reads never raise,
never block the lines after them, and every line ends as a row or a count.

Each example writes a new transcript (a good line, the fuzzed line, a good line)
and runs a real tick of a real host over it: the source, the ingest step and the
store. Lone surrogates, huge integers, NaN, nested values and timestamps that
overflow in UTC are all in the mix.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import hostcore_claude_code.plugin as claude_plugin
import hostcore_codex.plugin as codex_plugin
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcore.evidence.transcripts import SKIP_REASONS, Line, line_key

TEXT = st.text(st.one_of(st.characters(),
                         st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)),
               max_size=12)
TIMESTAMPS = st.sampled_from(["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00",
                              "2025-02-30T00:00:00Z", "2025-07-28T24:00:00Z", "0999-01-01Z",
                              "2025-07-28T22:54:41.4666666Z", "2025-07-28 22:54:41,5+05:30"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**80), 2**80),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT, TIMESTAMPS)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6)

CLAUDE_FIELDS = ["type", "cwd", "sessionId", "timestamp", "uuid", "gitBranch"]
CODEX_FIELDS = ["timestamp", "type", "payload"]
# The payload fields the Codex source reads, ``git.repository_url`` at its real depth.
CODEX_PAYLOAD = st.fixed_dictionaries({}, optional={
    "id": JSON, "cwd": JSON,
    "git": st.one_of(JSON, st.fixed_dictionaries({}, optional={"repository_url": JSON}))})
EXAMPLES = 60

_files = itertools.count()


def dumps(value: object) -> str:
    # ensure_ascii writes a lone surrogate as the escape \\udxxx, as a broken writer would.
    return json.dumps(value, ensure_ascii=True)


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


def keys(host: Any) -> set[str]:
    return {key for _, key in host.seam.read_rows_since_sync(None, 0, ["key"])}


def check_read_counts(collected: Any, event: str) -> None:
    """The last read accounted for every line: a row, or one count by reason."""
    attributes = collected.named(event)[-1].attributes
    skipped = sum(attributes[reason] for reason in SKIP_REASONS)
    assert attributes["lines"] == attributes["rows"] + skipped, attributes


@pytest.fixture
def claude_host(make_host, tmp_path):
    home = tmp_path / "home"
    return make_host(claude_plugin, config={"plugins": {"claude-code": {"home": str(home)}}})


@pytest.fixture
def codex_host(make_host, tmp_path):
    home = tmp_path / "home"
    return make_host(codex_plugin, config={"plugins": {"codex": {"home": str(home)}}})


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(fields=st.dictionaries(st.sampled_from(CLAUDE_FIELDS), JSON, min_size=1))
def test_claude_code_fields_of_any_json_value(claude_host, collected_events, fields):
    session = f"s-{uuid.uuid4().hex}"
    before, after = uuid.uuid4().hex, uuid.uuid4().hex

    def line(uid: str, **changed: object) -> str:
        return dumps({"type": "user", "cwd": "/w/fuzz", "sessionId": session, "uuid": uid,
                      "timestamp": "2025-07-28T22:54:41.466Z", "gitBranch": "main",
                      **changed})

    path = Path(claude_host.plugin_config("claude-code", claude_plugin.ClaudeCodeConfig).home
                or "") / ".claude" / "projects" / "-fuzz" / f"{next(_files)}.jsonl"
    write(path, [line(before), line(uuid.uuid4().hex, **fields), line(after)])
    report = claude_host.tick()
    assert report.ok, report.failed
    assert {f"{session}:{before}", f"{session}:{after}"} <= keys(claude_host)
    check_read_counts(collected_events, "claude_code.read")


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(["session_meta", "turn_context", "response_item", "compacted"]),
       fields=st.dictionaries(st.sampled_from(CODEX_FIELDS), JSON),
       payload=CODEX_PAYLOAD)
def test_codex_fields_of_any_json_value(codex_host, collected_events, kind, fields, payload):
    session = f"x-{uuid.uuid4().hex}"

    def header(second: int) -> str:
        return dumps({"timestamp": f"2025-09-14T10:00:0{second}.000Z", "type": "session_meta",
                      "payload": {"id": session, "cwd": "/w/fuzz",
                                  "git": {"repository_url": "https://h/o/r.git"}}})

    fuzzed: dict[str, object] = {"timestamp": "2025-09-14T10:00:01.000Z", "type": kind,
                                 "payload": payload, **fields}
    last = dumps({"timestamp": "2025-09-14T10:00:09.000Z", "type": "response_item",
                  "payload": {"n": uuid.uuid4().hex}})
    home = Path(codex_host.plugin_config("codex", codex_plugin.CodexConfig).home or "")
    path = (home / ".codex" / "sessions" / "2025" / "09" / "14" /
            f"rollout-{next(_files)}.jsonl")
    write(path, [header(0), dumps(fuzzed), header(2), last])
    report = codex_host.tick()
    assert report.ok, report.failed
    assert line_key(session, Line(0, last.encode())) in keys(codex_host)
    check_read_counts(collected_events, "codex.read")
