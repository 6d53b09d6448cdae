"""recover_interrupted_file_deletions: who may act, and what is kept when nobody may."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import (
    capture_file_revision,
    current_owner,
    delete_file_if_unchanged,
    pending_custody,
    recover_interrupted_file_deletions,
)
from hostcore_file_custody.locks import lock_exclusive
from hostcore_file_custody.owner import HostIdentity, OwnerRecord
from hostcore_file_custody.private import RECOVERY_LOCK_NAME, DeletionManifest

from hostcore.files import atomic_write


class Interrupted(Exception):
    pass


def _interrupt_at(target):
    def on_step(step):
        if step == target:
            raise Interrupted(step)

    return on_step


def _interrupted(tmp_path, step="pinned", *, data=b"stale heartbeat"):
    """A deletion of cache/alpha.json stopped at ``step``; returns (path, manifest path)."""
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, data)
    revision = capture_file_revision(path)
    with pytest.raises(Interrupted):
        delete_file_if_unchanged(path, revision, lambda pinned: True,
                                 on_step=_interrupt_at(step))
    private = path.parent / ".custody"
    manifest = next(private / n for n in os.listdir(private) if n.endswith(".json")
                    and not n.startswith("."))
    return path, manifest


def _set_creator(manifest_path, **changes):
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    creator = manifest.creator
    host_changes = {k: changes.pop(k) for k in list(changes) if k in HostIdentity.__struct_fields__}
    host = msgspec.structs.replace(creator.host, **host_changes)
    creator = msgspec.structs.replace(creator, host=host, **changes)
    atomic_write(manifest_path, msgspec.json.encode(
        msgspec.structs.replace(manifest, creator=creator)))


def _dead(manifest_path, kit):
    _set_creator(manifest_path, pid=kit.dead_pid(), start_ticks=1, lock=None)


def _pins(path):
    private = path.parent / ".custody"
    return sorted(n for n in os.listdir(private) if n.endswith(".pin"))


def test_a_dead_creators_pin_is_restored_when_validate_refuses(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    _dead(manifest, kit)
    asked = []
    results = recover_interrupted_file_deletions(
        path.parent, lambda source: asked.append(source) or False)
    assert [r.outcome for r in results] == ["restored"]
    assert results[0].source_path == str(path) == asked[0]
    assert path.read_bytes() == b"stale heartbeat" and _pins(path) == []


def test_a_dead_creators_deletion_completes_when_validate_agrees(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    _dead(manifest, kit)
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in results] == ["deleted"]
    assert not path.exists() and _pins(path) == []
    assert not manifest.exists()


def test_an_intent_without_a_pin_is_cleared_and_the_file_untouched(tmp_path, kit):
    path, manifest = _interrupted(tmp_path, "intent-recorded")
    _dead(manifest, kit)
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in results] == ["cleared"]
    assert path.read_bytes() == b"stale heartbeat" and not manifest.exists()


def test_a_live_creator_keeps_its_pin(tmp_path):
    path, _manifest = _interrupted(tmp_path)  # created by this very process
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [(r.outcome, r.source_path) for r in results] == [("kept-live", str(path))]
    assert results[0].recovery_location.endswith(".pin")
    assert _pins(path) and not path.exists()


def test_an_owner_whose_death_cannot_be_proven_keeps_its_pin(tmp_path):
    path, manifest = _interrupted(tmp_path)
    # A live PID with no recorded start time and no lock: alive or reused, nobody knows.
    _set_creator(manifest, pid=os.getppid(), start_ticks=None, lock=None)
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [(r.outcome, r.source_path) for r in results] == [
        ("kept-unknown-owner", str(path))]
    assert _pins(path)


def test_a_reused_pid_with_another_start_time_proves_death(tmp_path):
    path, manifest = _interrupted(tmp_path)
    own = current_owner()
    _set_creator(manifest, pid=own.pid, start_ticks=(own.start_ticks or 0) + 1, lock=None)
    results = recover_interrupted_file_deletions(path.parent, lambda source: False)
    assert [r.outcome for r in results] == ["restored"]


def test_a_free_lifetime_lock_proves_death_when_the_pid_cannot_tell(tmp_path):
    path, manifest = _interrupted(tmp_path)
    lock = tmp_path / "owner.lock"
    lock.write_bytes(b"")
    _set_creator(manifest, pid=os.getppid(), start_ticks=None, lock=str(lock))
    results = recover_interrupted_file_deletions(path.parent, lambda source: False)
    assert [r.outcome for r in results] == ["restored"]


@pytest.mark.parametrize("field,value", [
    ("pid_namespace", "pid:[1]"),
    ("hostname", "another-host"),
    ("machine_id", "0" * 32),
    ("platform", "win32"),
])
def test_a_manifest_from_another_host_or_namespace_keeps_everything(tmp_path, kit, field, value):
    path, manifest = _interrupted(tmp_path)
    _set_creator(manifest, pid=kit.dead_pid(), start_ticks=1, lock=None, **{field: value})
    before = manifest.read_bytes()
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [(r.outcome, r.source_path) for r in results] == [("kept-foreign", str(path))]
    assert _pins(path) and manifest.read_bytes() == before and not path.exists()


def test_a_malformed_manifest_keeps_everything_and_protects_the_folder(tmp_path):
    path, manifest = _interrupted(tmp_path)
    manifest.write_bytes(b"{not json")
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [(r.outcome, r.source_path) for r in results] == [("kept-malformed", None)]
    assert _pins(path) and manifest.read_bytes() == b"{not json"
    assert pending_custody(path.parent).unknown


def test_a_pin_without_a_manifest_is_of_unknown_identity(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    manifest.unlink()
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [(r.outcome, r.source_path) for r in results] == [("kept-unknown", None)]
    assert _pins(path)


def test_restoring_over_a_newer_file_retains_the_pin_until_validate_lets_it_go(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    _dead(manifest, kit)
    atomic_write(path, b"newer heartbeat")
    first = recover_interrupted_file_deletions(path.parent, lambda source: False)
    assert [r.outcome for r in first] == ["retained"]
    assert path.read_bytes() == b"newer heartbeat"
    assert Path(first[0].recovery_location).read_bytes() == b"stale heartbeat"
    assert pending_custody(path.parent).retained == 1
    # A later pass whose validate allows completion removes only the pinned bytes.
    second = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in second] == ["deleted"]
    assert path.read_bytes() == b"newer heartbeat" and _pins(path) == []


def test_a_retained_operation_is_recovered_while_its_creator_lives(tmp_path):
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, b"stale heartbeat")
    revision = capture_file_revision(path)

    def collide(_pinned):
        atomic_write(path, b"newer")
        return False

    assert delete_file_if_unchanged(path, revision, collide).outcome == "retained"
    path.unlink()  # the newer file went away: putting back is possible now
    results = recover_interrupted_file_deletions(path.parent, lambda source: False)
    assert [r.outcome for r in results] == ["restored"]
    assert path.read_bytes() == b"stale heartbeat"


def test_a_recovery_already_running_keeps_the_folder(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    _dead(manifest, kit)
    lock = lock_exclusive(path.parent / ".custody" / RECOVERY_LOCK_NAME)
    try:
        results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    finally:
        lock.close()
    assert [(r.outcome, r.source_path) for r in results] == [("kept-busy", None)]
    assert _pins(path)


def test_a_validate_error_keeps_the_pin(tmp_path, kit):
    path, manifest = _interrupted(tmp_path)
    _dead(manifest, kit)

    def explode(_source):
        raise OSError("disk gone")

    results = recover_interrupted_file_deletions(path.parent, explode)
    assert [r.outcome for r in results] == ["kept-error"]
    assert _pins(path)


def test_a_folder_without_custody_has_nothing_to_recover(tmp_path):
    assert recover_interrupted_file_deletions(tmp_path, lambda source: True) == []
    assert recover_interrupted_file_deletions(tmp_path / "missing", lambda source: True) == []


def test_an_owner_record_on_a_host_without_a_pid_namespace_is_never_acted_on(tmp_path):
    path, manifest = _interrupted(tmp_path)
    _set_creator(manifest, pid_namespace="")
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in results] == ["kept-foreign"]
    assert isinstance(current_owner(), OwnerRecord)
