"""Every stuck state has a way out: no-clobber put-back of anything
pinned (folders, files that cannot be hard-linked), a hand release that keeps the
evidence, and pruning by age of what nothing else will ever finish."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import (
    StaleSweep,
    capture_file_revision,
    delete_file_if_unchanged,
    pending_custody,
    recover_interrupted_file_deletions,
    release_custody,
)
from hostcore_file_custody.private import DeletionManifest
from hostcore_file_custody.status import custody_status
from hostcore_file_custody.worker import run_custody_pass

HOUR = 3600.0


class Interrupted(Exception):
    pass


def _interrupted(path: Path, data: bytes = b"stale heartbeat", step: str = "pinned",
                 before=None) -> Path:
    """A deletion of ``path`` stopped at ``step``; returns its manifest path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    revision = capture_file_revision(path)

    def on_step(name):
        if before is not None:
            before(name)
        if name == step:
            raise Interrupted(name)

    with pytest.raises(Interrupted):
        delete_file_if_unchanged(path, revision, lambda pinned: True, on_step=on_step)
    private = path.parent / ".custody"
    return next(private / n for n in os.listdir(private) if n.endswith(".json"))


def _rewrite(manifest_path: Path, *, age: float = 0.0, **host_changes) -> None:
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    creator = manifest.creator
    if host_changes:
        creator = msgspec.structs.replace(
            creator, host=msgspec.structs.replace(creator.host, **host_changes))
    manifest_path.write_bytes(msgspec.json.encode(msgspec.structs.replace(
        manifest, creator=creator, created_at=manifest.created_at - age)))


def _make_dead(manifest_path: Path, kit) -> None:
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    dead = msgspec.structs.replace(manifest.creator, pid=kit.dead_pid(), start_ticks=1,
                                   lock=None)
    manifest_path.write_bytes(msgspec.json.encode(msgspec.structs.replace(manifest,
                                                                          creator=dead)))


def _private(folder: Path) -> list[str]:
    private = folder / ".custody"
    return sorted(n for n in os.listdir(private) if not n.startswith(".")) \
        if private.exists() else []


# -- putting anything back ---------------------------------------------------------


def test_a_folder_swapped_in_at_the_pin_moment_is_put_back(tmp_path):
    path = tmp_path / "cache" / "alpha.json"
    path.parent.mkdir()
    path.write_bytes(b"stale heartbeat")
    revision = capture_file_revision(path)

    def swap_in_a_folder(step):
        if step == "intent-recorded":
            path.unlink()
            path.mkdir()
            (path / "inside").write_bytes(b"someone's data")

    result = delete_file_if_unchanged(path, revision, lambda pinned: True,
                                      on_step=swap_in_a_folder)
    assert result.outcome == "kept-changed"
    assert (path / "inside").read_bytes() == b"someone's data"
    assert _private(path.parent) == []


def test_recovery_puts_back_a_folder_a_dead_deleter_had_pinned(tmp_path, kit):
    path = tmp_path / "cache" / "alpha.json"

    def swap_in_a_folder(step):
        if step == "intent-recorded":
            path.unlink()
            path.mkdir()
            (path / "inside").write_bytes(b"someone's data")

    manifest = _interrupted(path, before=swap_in_a_folder)
    _make_dead(manifest, kit)
    results = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in results] == ["restored"]
    assert (path / "inside").read_bytes() == b"someone's data"
    assert _private(path.parent) == []


def test_a_refused_deletion_of_a_file_that_cannot_be_hard_linked_keeps_the_live_path(faults):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user than the deleter")
    if Path("/proc/sys/fs/protected_hardlinks").read_text().strip() != "1":
        pytest.skip("fs.protected_hardlinks is off: another user's file can be linked here")
    nobody = pwd.getpwnam("nobody")

    def plant(folder: Path) -> None:
        cache = folder / "cache"
        cache.mkdir()
        os.chown(cache, nobody.pw_uid, nobody.pw_gid)
        (cache / "alpha.json").write_bytes(b"live heartbeat")  # root's, mode 0644
        os.chmod(cache / "alpha.json", 0o644)

    seen = faults.run_unprivileged("other-users-file", plant)
    assert seen["linkable"] is False  # the deleter really cannot hard-link it back
    assert seen["outcome"] == "kept-refused"
    assert seen["back"] == "live heartbeat" and seen["leftovers"] == []


# -- releasing by hand ---------------------------------------------------------------


def test_a_foreign_manifest_is_reported_with_its_age_and_can_be_released(registry):
    path = registry.heartbeat_path("alpha")
    manifest = _interrupted(path)
    _rewrite(manifest, age=5 * HOUR, pid_namespace="pid:[4026530000]")

    recovered = recover_interrupted_file_deletions(path.parent, lambda source: True)
    assert [r.outcome for r in recovered] == ["kept-foreign"]
    assert recovered[0].age_seconds >= 5 * HOUR
    status = custody_status(registry)
    assert status["counts"]["foreign_manifests"] == 1
    assert status["counts"]["oldest_foreign_age_seconds"] >= 5 * HOUR
    [operation] = status["operations"]
    assert operation["owner"] == "foreign" and operation["source_path"] == str(path)

    [released] = release_custody(operation["location"])

    assert released.outcome == "released-restored"
    assert path.read_bytes() == b"stale heartbeat"
    assert pending_custody(path.parent).manifests == 0
    evidence = path.parent / ".custody-released"
    kept = sorted(os.listdir(evidence))
    assert kept == [manifest.name, manifest.name.replace(".json", ".release.json")]
    after = custody_status(registry)["counts"]
    assert after["foreign_manifests"] == 0 and after["released_evidence"] == 1


def test_release_refuses_while_the_owner_is_provably_alive(tmp_path):
    path = tmp_path / "cache" / "alpha.json"
    manifest = _interrupted(path)  # this very process created it: alive
    [refused] = release_custody(manifest)
    assert refused.outcome == "refused-live"
    assert manifest.exists() and not path.exists()
    assert not (path.parent / ".custody-released").exists()


def test_releasing_a_torn_manifest_with_a_pin_unblocks_the_whole_registry(registry, kit):
    planted = kit.plant_stale(registry, "beta")
    manifest = _interrupted(registry.heartbeat_path("alpha"))
    manifest.write_bytes(b"")  # torn: whose pin this is, nobody can tell
    assert StaleSweep(registry).run().protected_folders == 1

    [released] = release_custody(manifest)

    assert released.outcome == "released"
    evidence = registry.heartbeats_dir / ".custody-released"
    assert (evidence / manifest.name.replace(".json", ".pin")).read_bytes() == b"stale heartbeat"
    report = StaleSweep(registry).run()
    assert report.protected_folders == 0 and report.deleted == 1
    assert not registry.pid_map_path(planted.pid).exists()


def test_a_registry_restored_with_cp_a_keeps_sweeping_and_its_old_operation_can_be_released(
    tmp_path, kit,
):
    from hostcore_file_custody import HeartbeatRegistry

    original = HeartbeatRegistry(tmp_path / "original").ensure()
    _make_dead(_interrupted(original.heartbeat_path("alpha")), kit)  # died before the backup
    restored = HeartbeatRegistry(tmp_path / "restored")
    subprocess.run(["cp", "-a", str(original.root), str(restored.root)], check=True)
    kit.plant_stale(restored, "beta")

    report = StaleSweep(restored).run()

    assert report.protected_folders == 0 and report.deleted == 1  # beta: swept
    recovered = recover_interrupted_file_deletions(restored.heartbeats_dir, lambda s: True)
    assert [r.outcome for r in recovered] == ["kept-unknown"]
    assert recovered[0].source_path == str(restored.heartbeat_path("alpha"))
    [released] = release_custody(restored.heartbeat_path("alpha"))  # by its source path
    assert released.outcome == "released-restored"
    assert restored.heartbeat_path("alpha").read_bytes() == b"stale heartbeat"
    assert pending_custody(restored.heartbeats_dir).manifests == 0


def test_custody_recover_release_on_the_command_line(hostcore_cli, register_plugin, tmp_path):
    import hostcore_file_custody.plugin as custody_plugin

    register_plugin(custody_plugin)
    folder = tmp_path / "cli-root" / "plugins" / "file-custody" / "registry" / "heartbeats"
    manifest = _interrupted(folder / "alpha.json")
    _rewrite(manifest, hostname="a-host-long-gone")

    result = hostcore_cli("custody", "recover", "--release", str(manifest), "--json")

    assert result.exit_code == 0, result.stderr
    [released] = json.loads(result.stdout)["released"]
    assert released["outcome"] == "released-restored"
    assert (folder / "alpha.json").read_bytes() == b"stale heartbeat"
    refused = hostcore_cli("custody", "recover", "--release", str(folder / "nothing.json"))
    assert refused.exit_code == 1 and "not-found" in refused.stdout


# -- pruning by age ------------------------------------------------------------------


def test_killed_writers_temp_files_are_pruned_by_age(registry, kit):
    private = registry.heartbeats_dir / ".custody"
    private.mkdir(mode=0o700)
    old = [private / ".op_1_ab.json.0a1b2c3d.tmp", registry.heartbeats_dir / ".x.json.1234.tmp",
           registry.generations_dir / ".x.json.5678.tmp"]
    fresh = private / ".op_2_cd.json.4e5f6a7b.tmp"
    for path in [*old, fresh]:
        path.write_bytes(b"half a manifest")
    for path in old:
        kit.age(path, 2 * HOUR)

    report = run_custody_pass(registry)

    # The private and generation folders before the sweep; the cache folder by its scan.
    assert report.recovery["leftovers_pruned"] == 2 and report.sweep.leftovers_pruned == 1
    assert not any(path.exists() for path in old) and fresh.exists()


def test_finished_generation_records_are_pruned_by_age(registry, kit):
    from hostcore_file_custody import GenerationRecord

    week = 7 * 24 * HOUR
    records = {"ended-long-ago": ("terminal", 2 * week),
               "archived-long-ago": ("archived", 2 * week),
               "ended-yesterday": ("terminal", 24 * HOUR),
               "live-long-ago": ("live", 2 * week),
               "ended-but-beating": ("terminal", 2 * week)}
    for instance, (status, ago) in records.items():
        registry.write_generation(GenerationRecord(
            instance=instance, generation_id=f"gen_{instance}", status=status, epoch=3,
            changed_at=time.time() - ago))
        kit.age(registry.generation_path(instance), ago)
    with registry.start_session("ended-but-beating", continue_generation="gen_x"):
        registry.write_generation(GenerationRecord(
            instance="ended-but-beating", generation_id="gen_old", status="terminal", epoch=9,
            changed_at=time.time() - 2 * week))
        kit.age(registry.generation_path("ended-but-beating"), 2 * week)

        report = StaleSweep(registry).run()

    # A record still "live" with no heartbeat and a lock the sweep could take is a crashed
    # session's: pruned as well (test_custody_untrusted_records.py covers it in full).
    assert report.generations_pruned == 3
    left = sorted(p.stem for p in registry.generations_dir.glob("*.json"))
    assert left == ["ended-but-beating", "ended-yesterday"]
