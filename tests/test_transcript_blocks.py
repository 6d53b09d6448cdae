"""The block contract of transcript sources (``parse_lines``) stores what the line
contract (``parse_line``) stores, byte for byte: the same rows, keys, payloads,
skip counts by reason, usage and cursors, over corpora of both contrib sources
with every kind of line they skip. A fixed corpus also matches a digest recorded
with the line-by-line reader before the block contract existed, so keys stay what
earlier versions stored (a file read again adds nothing)."""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import hostcore_claude_code.source as claude
import hostcore_codex.source as codex

from hostcore.evidence.rows import EvidenceRow, SourceBatch
from hostcore.evidence.store import Store
from hostcore.evidence.transcripts import (
    FileState,
    JsonlFiles,
    Line,
    LineParser,
    LinesParser,
    ReadCounts,
    TranscriptCursor,
    TranscriptSource,
)

# The digest of the fixed corpus's dump (see dump), as the line-by-line reader of
# hostcore 0.2.6 and the contrib sources 0.2.2 stored it.
RECORDED = "6dd00edea2849b411a590c842becb433"
# Each source's line parser and block parser (None: read line by line).
Parsers = Mapping[str, tuple[LineParser, LinesParser | None]]
SEED = 32
MAX_LINE = 1500


def project(base: Path, n: int) -> str:
    folder = base / "work" / f"p{n}"
    (folder / ".git").mkdir(parents=True, exist_ok=True)
    (folder / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = https://user:secret@example.com/org/p{n}.git\n')
    return str(folder)


def claude_lines(rng: random.Random, cwd: str, sid: str) -> list[str]:
    """A Claude Code session with usage runs, tool blocks, summaries and faults."""
    out: list[str] = [json.dumps({"type": "summary", "summary": "s", "leafUuid": "x"})]
    for i in range(rng.randrange(30, 90)):
        kind = rng.randrange(14)
        if kind == 0:
            out.append('{"type": "user", "cwd": ')  # malformed
            continue
        if kind == 1:
            out.append(json.dumps({"type": "user", "cwd": cwd, "sessionId": sid,
                                   "message": {"content": "x" * MAX_LINE}}))  # oversized
            continue
        if kind == 2:
            out.append(json.dumps({"type": "cost-state", "sessionId": sid,
                                   "totalAPIDuration": i * 10, "totalLinesAdded": i}))
            continue
        if kind == 3:
            out.append(json.dumps({"type": "tools-used", "tools": ["Bash", "Edit"]}))
            continue
        if kind == 4:
            out.append(json.dumps({"type": "assistant", "cwd": cwd, "sessionId": sid,
                                   "message": {"usage": {"input_tokens": "many"}}}))
            continue  # a count of the wrong type: malformed
        line: dict[str, Any] = {"type": "assistant" if i % 2 else "user", "cwd": cwd,
                                "sessionId": sid, "gitBranch": rng.choice(["main", None]),
                                "timestamp": f"2025-07-{rng.randrange(1, 31):02d}T22:"
                                             f"{i % 60:02d}:{i % 60:02d}.{i:03d}Z"}
        if rng.random() < 0.8:
            line["uuid"] = f"{sid}-{i}"
        message: dict[str, Any] = {"content": rng.choice(
            ["text", [{"type": "tool_use", "name": "Bash"}],
             [{"type": "tool_result", "is_error": True}, {"type": "tool_result"}],
             None, 5, {"type": "tool_use"}, ' "tool_use" ', [1, "tool_result"]])}
        if kind == 5:  # a tool block named outside the content
            line["toolUseResult"] = {"type": "tool_result", "content": "done"}
        if i % 2 and rng.random() < 0.7:
            response = i - i % 4
            message.update({"id": f"msg-{response}", "model": "claude-sonnet-4-5",
                            "usage": {"input_tokens": response, "output_tokens": 7,
                                      "cache_read_input_tokens": 3}})
            line["requestId"] = f"req-{response}"
        line["message"] = message
        out.append(json.dumps(line))
    return out


def codex_lines(rng: random.Random, cwd: str, sid: str, n: int) -> list[str]:
    """A Codex rollout: a header (sometimes oversized), turns, token counts, faults."""
    out: list[str] = []
    if n % 2:
        out.append(json.dumps({"type": "response_item", "payload": {}}))  # no cwd yet
    header = {"id": sid, "cwd": cwd, "git": {"repository_url": f"https://t:p@git.example/{n}"}}
    if rng.random() < 0.3:
        header["instructions"] = "y" * MAX_LINE  # oversized: read from its prefix
    out.append(json.dumps({"timestamp": "2025-09-14T10:00:00Z", "type": "session_meta",
                           "payload": header}))
    total = [0, 0, 0]
    for i in range(rng.randrange(30, 90)):
        kind = rng.randrange(10)
        ts = f"2025-09-{rng.randrange(1, 31):02d}T10:{i % 60:02d}:00.{i:06d}+02:00"
        if kind == 0:
            out.append("not json")
        elif kind == 1:
            out.append(json.dumps({"timestamp": ts, "type": "turn_context",
                                   "payload": {"cwd": cwd, "model": "gpt-5"}}))
        elif kind in (2, 3):
            grown = [t + rng.randrange(0, 50) for t in total]
            grown[1] = min(grown[1], grown[0])
            total = grown if kind == 2 else [0, 0, 0]
            out.append(json.dumps({"timestamp": ts, "type": "event_msg", "payload": {
                "type": "token_count", "info": {"total_token_usage": {
                    "input_tokens": grown[0], "cached_input_tokens": grown[1],
                    "output_tokens": grown[2]}}}}))
        elif kind == 4:
            out.append(json.dumps({"timestamp": ts, "type": "event_msg", "payload": {
                "type": "token_count", "info": {"last_token_usage": {"input_tokens": -1}}}}))
        else:
            out.append(json.dumps({"timestamp": ts, "type": rng.choice(
                ["response_item", "event_msg"]), "payload": {"text": "z" * rng.randrange(99)}}))
    return out


def corpus(base: Path, *, real_projects: bool = True) -> Path:
    """Claude Code and Codex transcripts under ``base/home``, drawn from :data:`SEED`,
    their directories projects with git remotes (else paths that do not exist, for
    bytes that do not depend on ``base``)."""
    rng = random.Random(SEED)
    home = base / "home"
    for n in range(6):
        cwd = project(base, n % 3) if real_projects else f"/nowhere/p{n % 3}"
        folder = home / ".claude" / "projects" / f"p{n % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        data = "\n".join(claude_lines(rng, cwd, f"s{n}")) + "\n"
        (folder / f"s{n}.jsonl").write_text(("\ufeff" if n == 4 else "") + data)
        day = home / ".codex" / "sessions" / "2025" / "09" / f"{n + 1:02d}"
        day.mkdir(parents=True, exist_ok=True)
        (day / f"rollout-{n}.jsonl").write_text("\n".join(codex_lines(rng, cwd, f"c{n}", n))
                                                 + "\n")
    return home


def ingest(home: Path, store: Store, parsers: Parsers,
           budget_lines: int = 37) -> None:
    """Drain both sources into ``store`` batch by batch, as the ingest step does."""
    for name, folder, module in (("claude-code", home / ".claude", claude),
                                 ("codex", home / ".codex", codex)):
        parse, parse_lines = parsers[name]
        source = TranscriptSource(name=name, folder=folder, patterns=module.PATTERNS,
                                  parse=parse, parse_lines=parse_lines, event="e",
                                  emit=lambda *args, **kwargs: None,
                                  files=JsonlFiles(max_line_bytes=MAX_LINE,
                                                   budget_lines=budget_lines))
        while True:
            cursor = store.source_cursor(name)
            batch = source.read(cursor)
            store.ingest(name, batch, previous=cursor, staged=store.stage(batch.rows))
            if not batch.more:
                break


def dump(path: Path, base: Path) -> str:
    """Every stored row with its key and payload, skip counts, usage and cursors
    (without the files' inodes, which another copy of the corpus does not share)."""
    db = sqlite3.connect(path)
    try:
        tables = [
            db.execute("SELECT p.name, s.directory, s.source_id, e.position, e.session_id, "
                       "e.ts, e.git_remote, e.payload, e.key FROM evidence e "
                       "JOIN partitions p ON p.id = e.part JOIN scopes s ON s.id = e.scope "
                       "ORDER BY e.position").fetchall(),
            db.execute("SELECT source, skipped FROM source_health ORDER BY source").fetchall(),
            [(source, re.sub(r'"inode":\d+', "", cursor)) for source, cursor in db.execute(
                "SELECT source, cursor FROM source_cursors ORDER BY source")],
            # By directory, not scope id: which ids scopes get depends on the batches.
            [(directory, source_id, *found[1:]) for directory, source_id, *found in db.execute(
                "SELECT s.directory, s.source_id, u.* FROM usage u "
                "JOIN scopes s ON s.id = u.scope ORDER BY 1, 2, 4, 5, 6")],
        ]
    finally:
        db.close()
    return json.dumps(tables).replace(str(base), "<base>")


def stored(base: Path, parsers: Parsers,
           at: str, **options: Any) -> str:
    """The dump of a store named ``at`` that drained the corpus under ``base``."""
    path = base / f"{at}.sqlite3"
    store = Store(path)
    try:
        ingest(base / "home", store, parsers, **options)
    finally:
        store.close()
    return dump(path, base)


BY_LINE = {"claude-code": (claude.parse_line, None), "codex": (codex.parse_line, None)}
BY_BLOCK = {"claude-code": (claude.parse_line, claude.parse_lines),
            "codex": (codex.parse_line, codex.parse_lines)}


def test_blocks_store_exactly_what_lines_store(tmp_path: Path) -> None:
    corpus(tmp_path)
    by_line = stored(tmp_path, BY_LINE, "lines")
    assert stored(tmp_path, BY_BLOCK, "blocks") == by_line
    found = json.loads(by_line)
    assert len(found[0]) > 300  # rows of both sources
    skipped = {source: json.loads(counts) for source, counts in found[1]}
    # Every reason the corpus holds was counted, and the same way by both paths.
    assert {"malformed", "oversized", "no_cwd"} <= set(skipped["claude-code"])
    assert {"malformed", "oversized", "no_cwd"} <= set(skipped["codex"])
    assert found[3]  # usage was aggregated


def test_the_fixed_corpus_stores_what_the_line_reader_stored(tmp_path: Path) -> None:
    corpus(tmp_path, real_projects=False)
    by_block = stored(tmp_path, BY_BLOCK, "blocks")
    assert hashlib.sha256(by_block.encode()).hexdigest()[:32] == RECORDED


def test_a_block_budget_of_one_line_stores_the_same(tmp_path: Path) -> None:
    corpus(tmp_path)
    by_line = stored(tmp_path, BY_LINE, "lines", budget_lines=5_000)
    assert stored(tmp_path, BY_BLOCK, "blocks", budget_lines=1) == by_line


def test_reading_the_files_again_by_blocks_adds_nothing(tmp_path: Path) -> None:
    home = corpus(tmp_path)
    store = Store(tmp_path / "store.sqlite3")
    ingest(home, store, BY_LINE)
    before = json.loads(dump(tmp_path / "store.sqlite3", tmp_path))
    for name in ("claude-code", "codex"):  # the cursors forgotten: every file from 0
        store.ingest(name, SourceBatch([], None), previous=store.source_cursor(name))
    ingest(home, store, BY_BLOCK)
    store.close()
    assert json.loads(dump(tmp_path / "store.sqlite3", tmp_path))[0] == before[0]


def raising(parse: Callable[..., Any], marker: bytes) -> tuple[LineParser, LinesParser]:
    """A line parser that raises on lines holding ``marker`` (counted parse_error),
    and a block parser over it that raises for any block holding one."""

    def parse_line(source: TranscriptSource, name: str, line: Line,
                   state: FileState) -> EvidenceRow | None:
        if marker in line.data:
            raise RuntimeError("a parser bug")
        row: EvidenceRow | None = parse(source, name, line, state)
        return row

    def parse_lines(source: TranscriptSource, name: str, lines: list[bytes],
                    state: FileState, rows: list[EvidenceRow]) -> None:
        for start, data in enumerate(lines):
            # Rows, counts and context change before the raise: all undone.
            row = parse(source, name, Line(start, data), state)
            if row is not None:
                rows.append(row)
            if marker in data:
                raise RuntimeError("a parser bug")

    return parse_line, parse_lines


def test_a_block_parser_that_raises_is_undone_and_read_line_by_line(tmp_path: Path) -> None:
    line_only = {"claude-code": (raising(claude.parse_line, b'"tools-used"')[0], None),
                 "codex": (raising(codex.parse_line, b'"turn_context"')[0], None)}
    blocks = {"claude-code": raising(claude.parse_line, b'"tools-used"'),
              "codex": raising(codex.parse_line, b'"turn_context"')}
    corpus(tmp_path)
    by_line = stored(tmp_path, line_only, "lines")
    assert stored(tmp_path, blocks, "blocks") == by_line
    skipped = {source: json.loads(counts) for source, counts in json.loads(by_line)[1]}
    assert skipped["claude-code"]["parse_error"] > 0
    assert skipped["codex"]["parse_error"] > 0


def test_a_source_without_a_block_parser_is_read_line_by_line(tmp_path: Path) -> None:
    seen: list[bytes] = []

    def parse_line(source: TranscriptSource, name: str, line: Line,
                   state: FileState) -> EvidenceRow | None:
        seen.append(line.data)
        return None

    (tmp_path / "a.jsonl").write_bytes(b"one\ntwo\n")
    source = TranscriptSource(name="t", folder=tmp_path, patterns=("*.jsonl",),
                              parse=parse_line, event="e", emit=lambda *a, **k: None)
    assert source.read(None).rows == []
    assert seen == [b"one", b"two"]


def blocks_read(path: Path, files: JsonlFiles) -> tuple[list[bytes], list[bytes], int, bool]:
    """One read of ``path`` with a block handler: the lines handed in blocks, the
    oversized ones handed alone, the offset reached and whether a budget stopped it."""
    blocks: list[bytes] = []
    alone: list[bytes] = []
    at = [0]  # where the next line starts

    def handle_lines(name: str, start: int, lines: list[bytes], state: FileState) -> None:
        assert start == at[0]
        blocks.extend(lines)
        at[0] = start + sum(len(line) + 1 for line in lines)

    def handle_line(name: str, line: Line, state: FileState) -> None:
        assert line.oversized and line.start == at[0]
        alone.append(line.data)
        at[0] = line.end

    done = files.read([("f", str(path))], TranscriptCursor(), handle_line, ReadCounts(),
                      handle_lines=handle_lines)
    return blocks, alone, done.cursor.files["f"].offset, done.more


def test_the_read_budget_holds_for_blocks(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"aa\nbb\ncc\ndd\n")
    assert blocks_read(path, JsonlFiles(budget_bytes=4)) == ([b"aa", b"bb"], [], 6, True)
    assert blocks_read(path, JsonlFiles(budget_bytes=6)) == ([b"aa", b"bb"], [], 6, True)
    assert blocks_read(path, JsonlFiles(budget_lines=3)) == ([b"aa", b"bb", b"cc"], [], 9, True)
    assert blocks_read(path, JsonlFiles()) == ([b"aa", b"bb", b"cc", b"dd"], [], 12, False)


def test_a_read_out_of_time_stops_after_a_block(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x\n" * 5_000)
    ticks = iter(range(1_000_000))
    blocks, _, offset, more = blocks_read(
        path, JsonlFiles(budget_seconds=1.0, clock=lambda: float(next(ticks))))
    assert more
    assert len(blocks) == 512
    assert offset == 2 * 512


def test_an_oversized_line_goes_alone_between_blocks(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"aa\n" + b"y" * 40 + b"\nbb\n")
    blocks, alone, offset, more = blocks_read(path, JsonlFiles(max_line_bytes=16))
    assert (blocks, alone, offset, more) == ([b"aa", b"bb"], [b"y" * 16], 47, False)


def test_a_line_key_is_the_session_and_the_blake2b_of_the_line_as_stored_before() -> None:
    # Keys already stored dedupe a line read again: their form never changes.
    from hashlib import blake2b

    from hostcore.evidence.transcripts import data_key

    for data in (b"", b'{"type":"event_msg"}', bytes(range(256)) * 9):
        expected = f"s-1:{blake2b(data, digest_size=12).hexdigest()}"
        assert data_key("s-1", data) == expected
        assert data_key("s-1", data) == expected  # the shared hasher is left as it was
