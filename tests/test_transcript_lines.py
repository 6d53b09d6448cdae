"""JsonlFiles hands over exactly the complete lines a file holds, whatever the
block boundaries, line lengths and budgets: checked against splitting the bytes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hostcore.evidence.transcripts import (
    FileState,
    JsonlFiles,
    Line,
    ReadCounts,
    TranscriptCursor,
)

BOM = b"\xef\xbb\xbf"


def expected_lines(data: bytes, limit: int) -> list[tuple[int, bytes, bool, int]]:
    """Every complete line of ``data``: (start, at most ``limit`` bytes, oversized, end).
    A byte-order mark starting the file is no part of its first line."""
    found, start = [], len(BOM) if data.startswith(BOM) else 0
    while (newline := data.find(b"\n", start)) != -1:
        line = data[start:newline]
        found.append((start, line[:limit], len(line) > limit, newline + 1))
        start = newline + 1
    return found


def read_all(path: Path, files: JsonlFiles) -> tuple[list[tuple[int, bytes, bool, int]], int]:
    """Read ``path`` to the end, read after read; the lines and the final offset."""
    got: list[tuple[int, bytes, bool, int]] = []

    def handle(name: str, line: Line, state: FileState) -> None:
        got.append((line.start, line.data, line.oversized, line.end))

    cursor = TranscriptCursor()
    for _ in range(10_000):
        done = files.read([("f", str(path))], cursor, handle, ReadCounts())
        cursor = done.cursor
        if not done.more:
            break
    return got, cursor.files["f"].offset


LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=LINES, tail=st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"y")),
       limit=st.integers(1, 25), budget=st.integers(1, 7), budget_bytes=st.integers(1, 200))
def test_every_complete_line_is_handed_over_once_in_order(tmp_path_factory, lines, tail, limit,
                                                          budget, budget_bytes):
    data = b"".join(line + b"\n" for line in lines) + tail  # tail: a line still being written
    path = tmp_path_factory.mktemp("t") / "f.jsonl"
    path.write_bytes(data)
    got, offset = read_all(path, JsonlFiles(max_line_bytes=limit, budget_lines=budget,
                                            budget_bytes=budget_bytes))
    assert got == expected_lines(data, limit)
    # The unfinished line waits for its newline (past a byte-order mark already read).
    assert offset == max(len(data) - len(tail), len(BOM) if data.startswith(BOM) else 0)


def test_a_drain_lists_once_and_what_appears_meanwhile_is_read_by_the_next_listing(tmp_path):
    from hostcore.evidence.rows import EvidenceRow
    from hostcore.evidence.transcripts import TranscriptSource

    def parse(source, name, line, state):
        return EvidenceRow(partition="t", source_id="t", directory="/w",
                           key=f"{name}:{line.data.decode()}")

    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("a1\na2\na3\n")
    (folder / "b.jsonl").write_text("b1\nb2\nb3\n")
    source = TranscriptSource(name="t", folder=folder, patterns=("*.jsonl",), parse=parse,
                              event="t.read", emit=lambda *a, **k: None,
                              files=JsonlFiles(budget_lines=2))
    keys: list[list[str]] = []
    cursor = None
    for step in range(5):  # the drain ends at the fourth read; the fifth lists
        batch = source.read(cursor)
        keys.append([row.key for row in batch.rows])
        cursor = batch.cursor
        if step == 1:  # the drain has read past a.jsonl
            (folder / "c.jsonl").write_text("c1\n")  # a new file, mid-drain
            with (folder / "a.jsonl").open("a") as handle:
                handle.write("a4\n")  # and a finished file grows
    assert keys[:3] == [["a.jsonl:a1", "a.jsonl:a2"], ["a.jsonl:a3", "b.jsonl:b1"],
                        ["b.jsonl:b2", "b.jsonl:b3"]]
    # The drain goes on over the files it listed; the next read lists again.
    assert keys[3] == []
    assert sorted(keys[4]) == ["a.jsonl:a4", "c.jsonl:c1"]


def test_context_the_cursor_cannot_carry_is_dropped_and_its_rows_counted_by_the_store(
        tmp_path):
    # A parser that keeps a lone surrogate in a file's context: the read still hands
    # out a cursor that encodes, and the row made with it is skipped, counted.
    from hostcore.evidence.rows import EvidenceRow
    from hostcore.evidence.store import Store
    from hostcore.evidence.transcripts import TranscriptSource, decode_cursor

    def parse(source, name, line, state):
        if line.data == b"header":
            state.context["cwd"] = "/w/\udc80"
            state.context["kept"] = "fine"
        return EvidenceRow(partition="t", source_id="t", key=line.data.decode(),
                           directory=state.context.get("cwd", "/w"))

    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.jsonl").write_text("header\nafter\n")
    source = TranscriptSource(name="t", folder=folder, patterns=("*.jsonl",), parse=parse,
                              event="t.read", emit=lambda *a, **k: None)
    batch = source.read(None)
    assert decode_cursor(batch.cursor).files["a.jsonl"].context == {"kept": "fine"}
    store = Store(tmp_path / "store.sqlite3")
    outcome = store.ingest("t", batch, previous=None)
    assert (outcome.inserted, outcome.rejected) == (0, {"unencodable": 2})
    (folder / "a.jsonl").write_text("header\nafter\nlater\n")
    later = source.read(batch.cursor)
    assert [row.directory for row in later.rows] == ["/w"]  # the dropped cwd stays gone


def test_a_read_stops_after_the_line_that_uses_up_its_bytes_or_lines(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"aa\nbb\ncc\ndd\n")

    def first_read(files: JsonlFiles) -> list[bytes]:
        got: list[bytes] = []
        done = files.read([("f", str(path))], TranscriptCursor(),
                          lambda name, line, state: got.append(line.data), ReadCounts())
        assert done.more and done.stopped_at == "f"
        return got

    assert first_read(JsonlFiles(budget_bytes=4)) == [b"aa", b"bb"]
    assert first_read(JsonlFiles(budget_bytes=6)) == [b"aa", b"bb"]
    assert first_read(JsonlFiles(budget_lines=3)) == [b"aa", b"bb", b"cc"]


def test_a_read_out_of_time_stops_within_a_few_hundred_lines(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x\n" * 5_000)
    ticks = iter(range(1_000_000))
    got: list[bytes] = []
    # A clock that moves one second each time it is looked at: the deadline (one
    # second after the read starts) has passed at the first look within the file.
    done = JsonlFiles(budget_seconds=1.0, clock=lambda: float(next(ticks))).read(
        [("f", str(path))], TranscriptCursor(), lambda name, line, state: got.append(line.data),
        ReadCounts())
    assert done.more
    assert 0 < len(got) <= 512
    assert done.cursor.files["f"].offset == 2 * len(got)
