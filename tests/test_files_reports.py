"""``keep_report``: a disposable report another process reads, replaced atomically,
and left alone when the file already holds the same bytes."""

from __future__ import annotations

import os

import msgspec

from hostcore.files import keep_report, read_report

OLD = 1_000_000_000  # an mtime (seconds) no write of this test's could leave


class Summary(msgspec.Struct):
    provider: str
    listed: int = 0


def test_the_same_report_kept_again_leaves_the_file_unwritten(tmp_path):
    path = tmp_path / "last-cycle.json"
    keep_report(path, [Summary("gh")], "a summary")
    inode = path.stat().st_ino
    os.utime(path, (OLD, OLD))
    keep_report(path, [Summary("gh")], "a summary")
    assert (path.stat().st_ino, path.stat().st_mtime) == (inode, OLD)
    assert read_report(path, list[Summary]) == [Summary("gh")]


def test_a_changed_report_replaces_the_file(tmp_path):
    path = tmp_path / "last-cycle.json"
    keep_report(path, [Summary("gh")], "a summary")
    keep_report(path, [Summary("gh", listed=3)], "a summary")
    assert read_report(path, list[Summary]) == [Summary("gh", listed=3)]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_file_holding_the_report_and_more_is_replaced(tmp_path):
    path = tmp_path / "last-cycle.json"
    path.write_bytes(msgspec.json.encode([Summary("gh")]) + b"garbage")
    keep_report(path, [Summary("gh")], "a summary")
    assert path.read_bytes() == msgspec.json.encode([Summary("gh")])


def test_a_symlink_holding_the_same_bytes_is_replaced_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(msgspec.json.encode([Summary("gh")]))
    path = tmp_path / "last-cycle.json"
    path.symlink_to(elsewhere)
    keep_report(path, [Summary("gh")], "a summary")
    assert not path.is_symlink()
    assert read_report(path, list[Summary]) == [Summary("gh")]
