"""File revisions: what is captured, and what never matches."""

from __future__ import annotations

import hashlib
import os

import pytest
from hostcore_file_custody import (
    UnsafePathError,
    capture_file_revision,
    file_revision_matches,
)

from hostcore.files import atomic_write


def test_captures_digest_identity_and_times_of_a_regular_file(tmp_path):
    path = tmp_path / "cache.json"
    path.write_bytes(b'{"seq": 1}')
    revision = capture_file_revision(path)
    st = os.stat(path)
    assert revision.digest == hashlib.sha256(b'{"seq": 1}').hexdigest()
    assert (revision.dev, revision.ino, revision.size) == (st.st_dev, st.st_ino, 10)
    assert (revision.mtime_ns, revision.ctime_ns) == (st.st_mtime_ns, st.st_ctime_ns)
    assert file_revision_matches(path, revision)


def test_an_absent_file_has_no_revision(tmp_path):
    assert capture_file_revision(tmp_path / "missing.json") is None
    assert capture_file_revision(tmp_path / "no-such-dir" / "missing.json") is None


def test_refuses_a_symlink_and_never_reads_its_target(tmp_path):
    target = tmp_path / "target.json"
    target.write_bytes(b"secret")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(UnsafePathError, match="symlink"):
        capture_file_revision(link)
    assert not file_revision_matches(link, capture_file_revision(target))


def test_refuses_a_folder_reached_through_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "cache.json").write_bytes(b"x")
    (tmp_path / "alias").symlink_to(real)
    with pytest.raises(UnsafePathError):
        capture_file_revision(tmp_path / "alias" / "cache.json")


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_refuses_what_is_not_a_regular_file(tmp_path, kind):
    path = tmp_path / "odd"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)  # opened without blocking, then refused
    with pytest.raises(UnsafePathError, match="not a regular file"):
        capture_file_revision(path)


@pytest.mark.parametrize("name", ["..", ".custody", "/"])
def test_refuses_names_custody_cannot_act_on(tmp_path, name):
    with pytest.raises(UnsafePathError):
        capture_file_revision(tmp_path / name)


def test_a_republished_file_with_the_same_bytes_does_not_match(tmp_path):
    path = tmp_path / "cache.json"
    atomic_write(path, b"same bytes")
    before = capture_file_revision(path)
    atomic_write(path, b"same bytes")  # a new inode by atomic rename
    assert not file_revision_matches(path, before)
    assert capture_file_revision(path).digest == before.digest


def test_an_in_place_change_does_not_match(tmp_path):
    path = tmp_path / "cache.json"
    path.write_bytes(b"one")
    before = capture_file_revision(path)
    with open(path, "r+b") as handle:
        handle.write(b"two")
    assert not file_revision_matches(path, before)
