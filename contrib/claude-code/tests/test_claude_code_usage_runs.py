"""One API response on a run of lines: only the run's first line carries its usage,
the file's cursor remembering the last response across reads, and the store's
aggregate counts each response once whatever the source let through (a run split
between two reads, a file read again, lines of two responses interleaved)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import hostcore_claude_code.plugin as claude_plugin
import pytest

USAGE = {"input_tokens": 10, "output_tokens": 20, "cache_creation_input_tokens": 30,
         "cache_read_input_tokens": 40}


def line(cwd: str, uuid: str, *, response: str | None = None, n: int = 1,
         ts: str = "2025-09-14T10:05:00.000Z") -> dict[str, Any]:
    """A user line, or with ``response`` one assistant line of that response, whose
    counts are ``n`` times USAGE."""
    message: dict[str, Any] = {"role": "user", "content": "go on"}
    extra: dict[str, Any] = {}
    if response is not None:
        message = {"id": f"msg_{response}", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": [{"type": "text", "text": "ok"}],
                   "usage": {kind: count * n for kind, count in USAGE.items()}}
        extra = {"requestId": f"req_{response}"}
    return {"cwd": cwd, "sessionId": "s-1", "type": message["role"], "message": message,
            "uuid": uuid, "timestamp": ts, **extra}


def append(path: Path, lines: list[dict[str, Any]], mode: str = "a") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode) as handle:
        handle.writelines(json.dumps(found) + "\n" for found in lines)


@pytest.fixture
def setup(make_host, tmp_path):
    home = tmp_path / "home"
    path = home / ".claude" / "projects" / "-w" / "s-1.jsonl"
    host = make_host(claude_plugin, config={"plugins": {"claude-code": {"home": str(home)}}})
    return host, path, str(tmp_path / "w")


def aggregate(host) -> tuple[int, int, int, int, int]:
    with sqlite3.connect(host.store.path) as db:
        found = db.execute("SELECT SUM(responses), SUM(input_tokens), SUM(output_tokens), "
                           "SUM(cache_creation_input_tokens), SUM(cache_read_input_tokens) "
                           "FROM usage").fetchone()
    return tuple(found)


def usage_keys(host) -> list[str]:
    """The keys of the stored rows that carry a usage, in order."""
    with sqlite3.connect(host.store.path) as db:
        return [key for (key,) in db.execute(
            "SELECT key FROM evidence WHERE payload -> '$.usage' IS NOT NULL "
            "ORDER BY position")]


def test_only_the_first_line_of_a_run_carries_the_usage_and_it_counts_once(setup):
    host, path, cwd = setup
    append(path, [line(cwd, "a1", response="r1"), line(cwd, "a2", response="r1"),
                  line(cwd, "u1"), line(cwd, "a3", response="r1"),
                  line(cwd, "b1", response="r2", n=2)])
    host.tick()
    assert usage_keys(host) == ["s-1:a1", "s-1:b1"]
    assert aggregate(host) == (2, 30, 60, 90, 120)


def test_a_run_split_between_two_reads_counts_once(setup):
    host, path, cwd = setup
    append(path, [line(cwd, "a1", response="r1")])
    host.tick()
    # The rest of the response's lines, written after the first read.
    append(path, [line(cwd, "a2", response="r1"), line(cwd, "b1", response="r2")])
    host.tick()
    assert usage_keys(host) == ["s-1:a1", "s-1:b1"]
    assert aggregate(host) == (2, 20, 40, 60, 80)


def test_a_file_read_again_from_the_start_counts_nothing_twice(setup):
    host, path, cwd = setup
    append(path, [line(cwd, "a1", response="r1")])
    host.tick()
    # Replaced in place by a longer file: read again from the start with a fresh
    # context, so the response's line not stored yet carries its usage again.
    append(path, [line(cwd, "u0"), line(cwd, "a2", response="r1"),
                  line(cwd, "a1", response="r1"), line(cwd, "b1", response="r2")], mode="w")
    host.tick()
    assert usage_keys(host) == ["s-1:a1", "s-1:a2", "s-1:b1"]
    assert aggregate(host) == (2, 20, 40, 60, 80)
    host.tick()  # and once more, unchanged
    assert aggregate(host) == (2, 20, 40, 60, 80)


def test_lines_of_two_responses_interleaved_count_each_once(setup):
    host, path, cwd = setup
    # The source passes r1's third line on (it follows r2's), the store counts r1 once.
    append(path, [line(cwd, "a1", response="r1"), line(cwd, "b1", response="r2", n=2),
                  line(cwd, "a2", response="r1")])
    host.tick()
    assert usage_keys(host) == ["s-1:a1", "s-1:b1", "s-1:a2"]
    assert aggregate(host) == (2, 30, 60, 90, 120)


def test_a_run_split_between_files_counts_once(setup):
    host, path, cwd = setup
    append(path, [line(cwd, "a1", response="r1")])
    host.tick()
    # A resumed session's file starting with a copy of the response's line.
    append(path.with_name("s-2.jsonl"), [line(cwd, "a1-copy", response="r1"),
                                         line(cwd, "b1", response="r2")])
    host.tick()
    assert aggregate(host) == (2, 20, 40, 60, 80)
