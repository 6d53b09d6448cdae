"""The sink's file: one event per line, rotation by size, whole lines under concurrency."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from hostcore_jsonl_sink.sink import FILE_NAME, KEEP_MAX, JsonlSink
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcore.telemetry import Event


def test_each_event_is_one_json_line_in_order(tmp_path, make_event):
    sink = JsonlSink(tmp_path)
    for n in range(5):
        sink.receive(make_event(n))
    lines = (tmp_path / FILE_NAME).read_text().splitlines()
    assert [json.loads(line)["attributes"]["n"] for line in lines] == [0, 1, 2, 3, 4]
    assert json.loads(lines[0]) == {"name": "test.event", "ts": 1000.0, "attributes": {"n": 0}}


def test_rotation_keeps_the_newest_files_and_drops_the_oldest(tmp_path, make_event, read_lines):
    line_len = len(b'{"name":"test.event","ts":1000.0,"attributes":{"n":0,"pad":"') + 100
    sink = JsonlSink(tmp_path, max_bytes=3 * line_len + 10, keep=2)
    for n in range(20):
        sink.receive(make_event(n, padding=100))
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(FILE_NAME))
    assert names == [FILE_NAME, f"{FILE_NAME}.1", f"{FILE_NAME}.2"]
    replay = [e["attributes"]["n"] for e in read_lines(sink.files())]
    # The files hold a gap-free run of the newest events, oldest first.
    assert replay == list(range(20 - len(replay), 20))
    assert len(replay) > 3
    for path in sink.files():
        assert path.stat().st_size <= sink.max_bytes


def test_keep_zero_starts_a_fresh_file_without_rotated_copies(tmp_path, make_event, read_lines):
    sink = JsonlSink(tmp_path, max_bytes=200, keep=0)
    for n in range(30):
        sink.receive(make_event(n, padding=40))
    assert [p.name for p in sink.files()] == [FILE_NAME]
    assert not list(tmp_path.glob(f"{FILE_NAME}.*"))
    assert read_lines(sink.files())[-1]["attributes"]["n"] == 29


def test_a_line_longer_than_max_bytes_still_gets_written(tmp_path, make_event, read_lines):
    sink = JsonlSink(tmp_path, max_bytes=50, keep=1)
    sink.receive(make_event(1, padding=200))
    sink.receive(make_event(2, padding=200))
    assert [e["attributes"]["n"] for e in read_lines(sink.files())] == [1, 2]


def test_status_counts_files_bytes_and_events(tmp_path, make_event):
    sink = JsonlSink(tmp_path, max_bytes=100, keep=5)
    for n in range(6):
        sink.receive(make_event(n, padding=30))
    status = sink.status()
    assert status["written"] == 6
    assert status["files"] == len(sink.files()) > 1
    assert status["bytes"] == sum(p.stat().st_size for p in sink.files())


# The fixtures used here return pure functions, so sharing them across examples is safe.
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    paddings=st.lists(st.integers(min_value=0, max_value=120), min_size=1, max_size=40),
    max_bytes=st.integers(min_value=60, max_value=600),
    keep=st.integers(min_value=0, max_value=4),
)
def test_replay_is_always_a_gap_free_suffix_within_the_size_bound(
    tmp_path_factory, make_event, read_lines, paddings, max_bytes, keep
):
    folder = tmp_path_factory.mktemp("jsonl")
    sink = JsonlSink(folder, max_bytes=max_bytes, keep=keep)
    for n, padding in enumerate(paddings):
        sink.receive(make_event(n, padding=padding))
    replay = [e["attributes"]["n"] for e in read_lines(sink.files())]
    assert replay == list(range(len(paddings) - len(replay), len(paddings)))
    assert replay, "the newest event is always on disk"
    for path in sink.files():
        lines = path.read_bytes().splitlines(keepends=True)
        assert path.stat().st_size <= max_bytes or len(lines) == 1


def _append_many(folder: str, worker: int, count: int) -> None:
    sink = JsonlSink(folder, max_bytes=4096, keep=KEEP_MAX)
    for n in range(count):
        sink.receive(Event(name="test.event", ts=0.0,
                           attributes={"n": worker * 10_000 + n, "pad": "x" * 50}))


def test_concurrent_processes_interleave_whole_lines_and_lose_none(tmp_path, read_lines):
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=_append_many, args=(str(tmp_path), w, 300)) for w in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    reader = JsonlSink(tmp_path, max_bytes=4096, keep=KEEP_MAX)
    seen = [e["attributes"]["n"] for e in read_lines(reader.files())]
    assert sorted(seen) == sorted(w * 10_000 + n for w in range(3) for n in range(300))
    for w in range(3):
        mine = [n for n in seen if n // 10_000 == w]
        assert mine == sorted(mine), "each writer's events stay in its order"


def test_a_symlink_planted_for_the_live_file_is_never_written_through(tmp_path, make_event):
    folder = tmp_path / "sink"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (folder / FILE_NAME).symlink_to(victim)
    sink = JsonlSink(folder)
    with pytest.raises(OSError):
        sink.receive(make_event(1))
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("planted", ["symlink", "writable by others"])
def test_a_folder_others_could_plant_files_in_is_refused(tmp_path, make_event, planted):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder = tmp_path / "sink"
    if planted == "symlink":
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir()
        folder.chmod(0o777)
    sink = JsonlSink(folder)
    with pytest.raises(OSError):
        sink.receive(make_event(1))
    assert list(elsewhere.iterdir()) == [] and not (folder / FILE_NAME).exists()


def test_keep_has_an_upper_bound(tmp_path):
    with pytest.raises(ValueError, match="keep"):
        JsonlSink(tmp_path, keep=KEEP_MAX + 1)
    assert JsonlSink(tmp_path, keep=KEEP_MAX).keep == KEEP_MAX
