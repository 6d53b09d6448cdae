"""Custody on a filesystem without ``renameat2(RENAME_NOREPLACE)``: put back by hard
link, and where neither works, custody refused and the live path never touched.

Every filesystem on this machine has ``renameat2``, so the missing call is
simulated where the probe and the put-back make it (``fsio.rename_noreplace``
failing with ``EINVAL``, as the kernel answers for a filesystem without it);
the links, renames and unlinks around it are real.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hostcore_file_custody import capture_file_revision, delete_file_if_unchanged, fsio

LIVE = b"live heartbeat"


def _no(call: str):
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EINVAL, f"{call} is not supported on this filesystem")
    return refuse


@pytest.fixture
def without_renameat2(monkeypatch):
    monkeypatch.setattr(fsio, "_PUT_BACK", {})  # the probe's answer is cached per device
    monkeypatch.setattr(fsio, "rename_noreplace", _no("renameat2"))


@pytest.fixture
def without_hard_links(monkeypatch, without_renameat2):
    real_link = os.link

    def link(src, dst, **kwargs):
        if str(src).startswith(".probe-"):
            raise OSError(errno.EPERM, "hard links are not supported on this filesystem")
        return real_link(src, dst, **kwargs)

    monkeypatch.setattr(fsio.os, "link", link)


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "cache" / "alpha.json"
    path.parent.mkdir()
    path.write_bytes(LIVE)
    return path


def _leftovers(folder: Path) -> list[str]:
    private = folder / ".custody"
    return sorted(n for n in os.listdir(private) if not n.startswith(".")) \
        if private.exists() else []


def test_the_probe_falls_back_to_hard_links(tmp_path, without_renameat2):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert fsio.put_back_method(fd) == "link"
    finally:
        os.close(fd)
    assert os.listdir(tmp_path) == [], "the probe leaves nothing behind"


def test_a_refused_deletion_is_put_back_by_hard_link(tmp_path, without_renameat2):
    path = _file(tmp_path)
    result = delete_file_if_unchanged(path, capture_file_revision(path), lambda pinned: False)
    assert result.outcome == "kept-refused"
    assert path.read_bytes() == LIVE and path.stat().st_nlink == 1
    assert _leftovers(path.parent) == []


def test_a_validated_deletion_still_deletes_with_hard_links_only(tmp_path, without_renameat2):
    path = _file(tmp_path)
    result = delete_file_if_unchanged(path, capture_file_revision(path), lambda pinned: True)
    assert result.outcome == "deleted" and not path.exists()
    assert _leftovers(path.parent) == []


def test_a_filesystem_that_can_put_nothing_back_is_refused_custody(tmp_path,
                                                                   without_hard_links):
    path = _file(tmp_path)
    result = delete_file_if_unchanged(path, capture_file_revision(path), lambda pinned: True)
    assert result.outcome == "kept-unsupported"
    assert "custody refused" in result.reason
    assert path.read_bytes() == LIVE, "the live path is never emptied"
    assert _leftovers(path.parent) == []


def test_a_folder_swapped_in_at_the_pin_moment_is_put_back_without_renameat2(
        tmp_path, without_renameat2):
    path = _file(tmp_path)

    def swap_in_a_folder(step):
        if step == "intent-recorded":
            path.unlink()
            path.mkdir()
            (path / "inside").write_bytes(b"someone's data")

    result = delete_file_if_unchanged(path, capture_file_revision(path), lambda pinned: True,
                                      on_step=swap_in_a_folder)
    assert result.outcome == "kept-changed"
    assert (path / "inside").read_bytes() == b"someone's data"
    assert _leftovers(path.parent) == []
