"""A transcript file that starts with a UTF-8 byte-order mark loses no line to it.

Editors and PowerShell's ``Out-File -Encoding utf8`` put ``EF BB BF`` before the first
line; that line used to reach the parser with the mark in front of its JSON and be
counted ``malformed``. The reader now steps over the mark at the start of a file (one
look per block read from offset 0, nothing per line), so the first line is handed
over from byte 3 and every offset after it stays the file's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hostcore.evidence.transcripts import (
    FileState,
    JsonlFiles,
    Line,
    ReadCounts,
    TranscriptCursor,
)

BOM = b"\xef\xbb\xbf"


def read(path: Path, files: JsonlFiles, cursor: TranscriptCursor | None = None
         ) -> tuple[list[tuple[int, bytes, bool, int]], TranscriptCursor]:
    got: list[tuple[int, bytes, bool, int]] = []

    def handle(name: str, line: Line, state: FileState) -> None:
        got.append((line.start, line.data, line.oversized, line.end))

    cursor = cursor or TranscriptCursor()
    for _ in range(1_000):
        done = files.read([("f", str(path))], cursor, handle, ReadCounts())
        cursor = done.cursor
        if not done.more:
            break
    return got, cursor


def test_the_first_line_is_handed_over_without_the_mark(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(BOM + b'{"a":1}\n{"b":2}\n')
    got, cursor = read(path, JsonlFiles())
    assert got == [(3, b'{"a":1}', False, 11), (11, b'{"b":2}', False, 19)]
    assert cursor.files["f"].offset == path.stat().st_size


def test_a_first_line_still_being_written_after_the_mark_waits_then_reads_once(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(BOM + b'{"a":')
    got, cursor = read(path, JsonlFiles())
    assert got == []
    with path.open("ab") as handle:
        handle.write(b'1}\n')
    got, cursor = read(path, JsonlFiles(), cursor)
    assert got == [(3, b'{"a":1}', False, 11)]
    got, _ = read(path, JsonlFiles(), cursor)
    assert got == []  # nothing twice


def test_an_oversized_first_line_after_the_mark_is_counted_not_stuck(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(BOM + b"x" * 50 + b"\n" + b'{"b":2}\n')
    got, cursor = read(path, JsonlFiles(max_line_bytes=10))
    assert got == [(3, b"x" * 10, True, 54), (54, b'{"b":2}', False, 62)]
    assert cursor.files["f"].offset == 62


def test_tiny_budgets_still_get_past_the_mark(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(BOM + b"a\nb\n")
    got, _ = read(path, JsonlFiles(budget_bytes=1, budget_lines=1))
    assert got == [(3, b"a", False, 5), (5, b"b", False, 7)]


def test_a_mark_later_in_the_file_is_the_line_s_own_bytes(tmp_path):
    # Only a file's start can hold a byte-order mark; elsewhere the bytes are data.
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"a\n" + BOM + b"b\n")
    got, _ = read(path, JsonlFiles())
    assert got == [(0, b"a", False, 2), (2, BOM + b"b", False, 7)]


def test_a_claude_transcript_saved_with_a_mark_gives_every_row(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir(mode=0o700)
    session = home / ".claude" / "projects" / "-work" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    lines = [json.dumps({
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/work",
        "sessionId": "s1", "version": "2.0.61", "gitBranch": "main", "type": "user",
        "message": {"role": "user", "content": "hello"}, "uuid": f"u{n}",
        "timestamp": "2025-07-28T22:54:41.466Z"}) for n in range(3)]
    session.write_bytes(BOM + "".join(f"{line}\n" for line in lines).encode())
    env = {**os.environ, "HOME": str(home), "HOSTCORE_LOAD_PLUGINS": "claude-code"}
    env.pop("CLAUDE_CONFIG_DIR", None)

    def hostcore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                              capture_output=True, text=True, timeout=120, env=env,
                              check=False)

    ran = hostcore("run", "--once", "--json")
    assert ran.returncode == 0, ran.stderr
    ingest = next(s for s in json.loads(ran.stdout.splitlines()[0])["steps"]
                  if s["name"] == "ingest")
    assert ingest["counts"]["lines_skipped"] == 0
    shown = hostcore("evidence", "--json")
    assert json.loads(shown.stdout)["rows"] == 3
