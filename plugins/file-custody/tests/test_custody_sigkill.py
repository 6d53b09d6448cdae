"""The real pin owner is SIGKILLed at each step of a deletion; a later recovery (in this,
another, process) restores or finishes correctly, and a foreign manifest keeps everything."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import (
    pending_custody,
    recover_interrupted_file_deletions,
)
from hostcore_file_custody.private import DeletionManifest
from hostcore_file_custody.worker import run_custody_pass

from hostcore.files import atomic_write

DATA = b"the stale heartbeat's exact bytes"


def _state(path: Path) -> tuple[bytes | None, list[str]]:
    private = path.parent / ".custody"
    data = path.read_bytes() if path.exists() else None
    leftovers = sorted(n for n in os.listdir(private) if not n.startswith(".")) \
        if private.exists() else []
    return data, leftovers


# step at which the owner dies -> (outcome of a recovery refusing completion, of one allowing it)
STEPS = {
    "intent-recorded": ("cleared", "cleared"),
    "pinned": ("restored", "deleted"),
    "validating": ("restored", "deleted"),
    "confirmed": ("restored", "deleted"),
    "unlinked": ("cleared", "cleared"),
}


@pytest.mark.parametrize("may_complete", [False, True], ids=["refuse", "complete"])
@pytest.mark.parametrize("step", list(STEPS))
def test_recovery_after_the_owner_is_killed_at_each_step(tmp_path, step, may_complete, kill_at):
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, DATA)
    original_ino = os.stat(path).st_ino
    assert kill_at("delete", str(path), step, "yes") == f"paused {step}"

    results = recover_interrupted_file_deletions(path.parent, lambda source: may_complete)

    expected = STEPS[step][may_complete]
    assert [(r.outcome, r.source_path) for r in results] == [(expected, str(path))]
    data, leftovers = _state(path)
    assert leftovers == []
    if step == "unlinked" or (expected == "deleted"):
        assert data is None
    else:
        assert data == DATA and os.stat(path).st_ino == original_ino


def test_recovery_after_the_owner_is_killed_while_putting_the_file_back(tmp_path, kill_at):
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, DATA)
    assert kill_at("delete", str(path), "restore-linked", "no") == "paused restore-linked"
    # The file is back at the path: moved there by a no-clobber rename (nothing pinned
    # is left: "cleared"), or linked there with the pin still sharing its inode.
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in results] in (["cleared"], ["restored"])
    assert _state(path) == (DATA, [])


def test_a_manifest_from_another_pid_namespace_keeps_everything_after_the_kill(tmp_path, kill_at):
    path = tmp_path / "cache" / "alpha.json"
    atomic_write(path, DATA)
    kill_at("delete", str(path), "pinned", "yes")
    private = path.parent / ".custody"
    manifest_path = next(private / n for n in os.listdir(private) if n.endswith(".json"))
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    foreign_host = msgspec.structs.replace(manifest.creator.host, pid_namespace="pid:[4026532999]")
    atomic_write(manifest_path, msgspec.json.encode(msgspec.structs.replace(
        manifest, creator=msgspec.structs.replace(manifest.creator, host=foreign_host))))
    before = _state(path)

    results = recover_interrupted_file_deletions(path.parent, lambda source: True)

    assert [(r.outcome, r.source_path) for r in results] == [("kept-foreign", str(path))]
    assert _state(path) == before and before[0] is None and len(before[1]) == 2


def test_a_sweep_killed_before_its_private_unlink_is_finished_by_the_next_pass(registry, kit,
                                                                              kill_at):
    planted = kit.plant_stale(registry, "alpha")
    assert kill_at("sweep", str(registry.root), "before_unlink") == "paused before_unlink"
    assert not registry.heartbeat_path("alpha").exists()  # pinned by the dead sweeper
    assert pending_custody(registry.heartbeats_dir).sources == {"alpha.json"}

    report = run_custody_pass(registry)

    # Nothing lived at the path: the bytes went back, and the sweep judged them afresh.
    assert report.recovery["restored"] == 1
    assert report.sweep.deleted == 1 and report.sweep.dependents_deleted == 2
    assert not registry.heartbeat_path("alpha").exists()
    assert not registry.pid_map_path(planted.pid).exists()
    for folder in registry.cache_dirs.values():
        assert kit.private_entries(folder) == []
    assert kit.observations(registry) == [planted.generation_id] * 2


def test_a_sweep_killed_while_pinning_a_dependent_keeps_it_for_recovery(registry, kit, kill_at):
    planted = kit.plant_stale(registry, "alpha")
    assert kill_at("sweep", str(registry.root), "after_dependent_pin") == \
        "paused after_dependent_pin"
    assert pending_custody(registry.pid_map_dir).sources == {f"{planted.pid}.json"}
    # While the pin is pending the sweep leaves that entry alone.
    report = run_custody_pass(registry)
    assert report.recovery["restored"] == 1  # the pid-map entry came back ...
    assert report.sweep.dependents_deleted == 2  # ... and orphan pruning finished the job
    assert not registry.pid_map_path(planted.pid).exists()
    assert not registry.prompt_hash_path("alpha").exists()
