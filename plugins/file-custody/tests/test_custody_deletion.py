"""delete_file_if_unchanged: exact deletion through a pin, and putting back without clobbering."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import (
    UnsafePathError,
    capture_file_revision,
    delete_file_if_unchanged,
)
from hostcore_file_custody.private import DeletionManifest

from hostcore.files import atomic_write


def _file(tmp_path, data=b"stale heartbeat"):
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, data)
    return path, capture_file_revision(path)


def _private(path):
    return path.parent / ".custody"


def _visible(folder):
    return sorted(n for n in os.listdir(folder) if not n.startswith("."))


def test_deletes_an_unchanged_file_after_validating_its_pin(tmp_path):
    path, revision = _file(tmp_path)
    seen = []

    def validate(pinned):
        # While validating, the file is pinned in the private folder, with its intent.
        seen.append((pinned, path.exists(), _visible(_private(path))))
        return True

    result = delete_file_if_unchanged(path, revision, validate)

    assert (result.deleted, result.outcome) == (True, "deleted")
    assert not path.exists()
    pinned, visible_at_path, private = seen[0]
    assert pinned.same_file(revision) and not visible_at_path
    assert len(private) == 2 and {n.rsplit(".", 1)[1] for n in private} == {"json", "pin"}
    assert _visible(_private(path)) == []


def test_the_private_folder_is_owner_only_and_manifests_use_the_state_file_mode(tmp_path):
    path, revision = _file(tmp_path)
    modes = {}

    def validate(_pinned):
        private = _private(path)
        modes["folder"] = stat.S_IMODE(os.stat(private).st_mode)
        manifest = next(n for n in os.listdir(private) if n.endswith(".json"))
        modes["manifest"] = stat.S_IMODE(os.stat(private / manifest).st_mode)
        record = msgspec.json.decode((private / manifest).read_bytes(), type=DeletionManifest)
        modes["state"] = record.state
        return True

    delete_file_if_unchanged(path, revision, validate)
    assert modes == {"folder": 0o700, "manifest": 0o600, "state": "intent"}


def test_keeps_a_file_replaced_before_the_call_without_pinning_it(tmp_path):
    path, revision = _file(tmp_path)
    atomic_write(path, b"refreshed heartbeat")
    calls = []
    result = delete_file_if_unchanged(path, revision, lambda pinned: calls.append(1) or True)
    assert (result.deleted, result.outcome) == (False, "kept-changed")
    assert path.read_bytes() == b"refreshed heartbeat" and calls == []


def test_puts_back_a_newer_file_that_was_pinned_in_place_of_the_expected_one(tmp_path):
    path, revision = _file(tmp_path)
    newer = {}

    def replace_after_intent(step):
        if step == "intent-recorded":
            atomic_write(path, b"newer heartbeat")
            newer["ino"] = os.stat(path).st_ino

    result = delete_file_if_unchanged(path, revision, lambda pinned: True,
                                      on_step=replace_after_intent)

    assert (result.deleted, result.outcome) == (False, "kept-changed")
    assert path.read_bytes() == b"newer heartbeat"
    assert os.stat(path).st_ino == newer["ino"]  # the very inode, linked back
    assert _visible(_private(path)) == []


def test_a_refused_validation_puts_the_same_inode_back(tmp_path):
    path, revision = _file(tmp_path)
    result = delete_file_if_unchanged(path, revision, lambda pinned: False)
    assert (result.deleted, result.outcome) == (False, "kept-refused")
    assert capture_file_revision(path).same_file(revision)
    assert _visible(_private(path)) == []


def test_a_validation_error_puts_the_file_back(tmp_path):
    path, revision = _file(tmp_path)

    def explode(_pinned):
        raise RuntimeError("audit store unavailable")

    result = delete_file_if_unchanged(path, revision, explode)
    assert (result.deleted, result.outcome) == (False, "restored")
    assert "RuntimeError" in result.reason
    assert capture_file_revision(path).same_file(revision)


def test_a_restore_collision_retains_the_pinned_bytes_and_says_where(tmp_path):
    path, revision = _file(tmp_path)

    def publish_then_refuse(_pinned):
        atomic_write(path, b"published while pinned")
        return False

    result = delete_file_if_unchanged(path, revision, publish_then_refuse)

    assert (result.deleted, result.outcome) == (False, "retained")
    assert path.read_bytes() == b"published while pinned"
    location = result.recovery_location
    assert location is not None and Path(location).read_bytes() == b"stale heartbeat"
    manifest_path = Path(location.removesuffix(".pin") + ".json")
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    assert manifest.state == "retained" and "newer file" in manifest.reason


def test_never_unlinks_a_newer_file_published_just_before_the_private_unlink(tmp_path):
    path, revision = _file(tmp_path)

    def publish_at(step):
        if step == "confirmed":
            atomic_write(path, b"refreshed at the last moment")

    result = delete_file_if_unchanged(path, revision, lambda pinned: True, on_step=publish_at)

    assert result.deleted
    assert path.read_bytes() == b"refreshed at the last moment"


def test_refuses_a_symlink_at_the_path_and_leaves_its_target(tmp_path):
    path, revision = _file(tmp_path)
    link = path.parent / "link.json"
    link.symlink_to(path)
    with pytest.raises(UnsafePathError):
        delete_file_if_unchanged(link, revision, lambda pinned: True)
    assert link.is_symlink() and path.exists()


def test_refuses_a_private_folder_others_can_read(tmp_path):
    path, revision = _file(tmp_path)
    _private(path).mkdir(mode=0o755)
    os.chmod(_private(path), 0o755)
    with pytest.raises(UnsafePathError, match="owner-only"):
        delete_file_if_unchanged(path, revision, lambda pinned: True)
    assert path.exists()


def test_refuses_a_private_folder_that_is_a_symlink(tmp_path):
    path, revision = _file(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    _private(path).symlink_to(elsewhere)
    with pytest.raises(UnsafePathError):
        delete_file_if_unchanged(path, revision, lambda pinned: True)
    assert path.exists() and os.listdir(elsewhere) == []


def test_a_pin_written_to_during_validation_is_put_back_not_deleted(tmp_path):
    path, revision = _file(tmp_path)

    def write_into_the_pin(_pinned):
        private = _private(path)
        pin = next(private / n for n in os.listdir(private) if n.endswith(".pin"))
        with open(pin, "ab") as handle:  # through the inode, as an old descriptor would
            handle.write(b" and more")
        return True

    result = delete_file_if_unchanged(path, revision, write_into_the_pin)
    assert (result.deleted, result.outcome) == (False, "restored")
    assert path.read_bytes() == b"stale heartbeat and more"
