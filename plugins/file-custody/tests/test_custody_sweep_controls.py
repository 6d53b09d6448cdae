"""Focused controls of the stale sweep: what it removes, what it keeps, and why."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import msgspec
from hostcore_file_custody import (
    LOCKS,
    Heartbeat,
    HeartbeatRegistry,
    OwnerRecord,
    PidMapEntry,
    StaleSweep,
    SweepHooks,
    capture_file_revision,
    current_owner,
    delete_file_if_unchanged,
)
from hostcore_file_custody.private import DeletionManifest

from hostcore.files import atomic_write


def _sweep(registry: HeartbeatRegistry, **options):
    return StaleSweep(registry, **options).run()


def _untouched(registry: HeartbeatRegistry, planted) -> None:
    assert registry.heartbeat_path(planted.instance).exists()
    assert registry.read_pid_map(planted.pid).instance == planted.instance
    assert registry.prompt_hash_path(planted.instance).exists()


def test_sweeps_a_dead_sessions_heartbeat_and_dependents(registry, custody_host,
                                                        collected_events, kit):
    planted = kit.plant_stale(registry, "alpha")
    report = _sweep(registry, emit=custody_host.emit)
    assert (report.deleted, report.dependents_deleted, report.observations) == (1, 2, 1)
    assert not registry.heartbeat_path("alpha").exists()
    assert not registry.pid_map_path(planted.pid).exists()
    assert not registry.prompt_hash_path("alpha").exists()
    assert not registry.lock_path("alpha").exists()  # nothing left to guard
    # The observation is provisional: the generation stays as it was.
    assert registry.read_generation("alpha").status == "live"
    assert kit.observations(registry) == [planted.generation_id]
    completed = collected_events.named("custody.sweep_completed")[0].attributes
    assert completed["deleted"] == 1 and completed["lock_acquisitions"] == 1


def test_fresh_heartbeats_are_judged_from_the_scan_alone(registry, kit):
    with registry.start_session("fresh"):
        kit.plant_stale(registry, "alpha")
        before = LOCKS.acquisitions
        report = _sweep(registry)
        assert report.scanned == 2 and report.candidates == 1
        assert LOCKS.acquisitions - before == 1  # only the stale candidate's custody
        assert registry.heartbeat_path("fresh").exists()


def test_keeps_an_old_heartbeat_whose_session_is_alive_in_this_process(registry, kit):
    with registry.start_session("alpha") as session:
        kit.age(registry.heartbeat_path("alpha"))
        report = _sweep(registry)
        assert (report.kept_live, report.deleted) == (1, 0)
        assert registry.read_heartbeat("alpha").generation_id == session.generation_id


def test_keeps_an_old_heartbeat_whose_owner_holds_its_lock_in_another_process(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    script = textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(registry.lock_path("alpha"))!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        report = _sweep(registry)
    finally:
        child.kill()
        child.wait()
    assert (report.kept_live, report.deleted) == (1, 0)
    _untouched(registry, planted)


def test_keeps_a_heartbeat_whose_owner_pid_is_alive_without_its_lock(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    heartbeat = registry.read_heartbeat("alpha")
    # The recorded owner is this very process (same PID and start time): alive.
    alive = msgspec.structs.replace(current_owner(), lock=heartbeat.owner.lock)
    registry.write_heartbeat(msgspec.structs.replace(heartbeat, owner=alive))
    kit.age(registry.heartbeat_path("alpha"))
    report = _sweep(registry)
    assert (report.kept_live, report.deleted) == (1, 0)
    _untouched(registry, planted)


def test_keeps_a_heartbeat_and_its_dependents_when_owner_liveness_is_unknown(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    heartbeat = registry.read_heartbeat("alpha")
    # A live PID with no start time, and a lock elsewhere that cannot be probed.
    unknown = OwnerRecord(host=current_owner().host, pid=os.getppid(), start_ticks=None,
                          lock=str(registry.root / "nowhere.lock"))
    registry.write_heartbeat(msgspec.structs.replace(heartbeat, owner=unknown))
    kit.age(registry.heartbeat_path("alpha"))
    report = _sweep(registry)
    assert (report.kept_uncertain, report.deleted) == (1, 0)
    _untouched(registry, planted)


def test_keeps_a_heartbeat_written_on_another_host(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    heartbeat = registry.read_heartbeat("alpha")
    foreign = msgspec.structs.replace(heartbeat.owner, host=msgspec.structs.replace(
        heartbeat.owner.host, hostname="elsewhere"))
    registry.write_heartbeat(msgspec.structs.replace(heartbeat, owner=foreign))
    kit.age(registry.heartbeat_path("alpha"))
    report = _sweep(registry)
    assert (report.kept_uncertain, report.deleted) == (1, 0)
    _untouched(registry, planted)


def test_keeps_a_malformed_heartbeat_and_its_dependents(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    registry.heartbeat_path("alpha").write_bytes(b"{torn")
    kit.age(registry.heartbeat_path("alpha"))
    report = _sweep(registry)
    assert (report.kept_uncertain, report.deleted) == (1, 0)
    _untouched(registry, planted)


def test_keeps_a_symlinked_heartbeat_and_its_target(registry, kit, tmp_path):
    target = tmp_path / "target.json"
    target.write_bytes(b"{}")
    registry.heartbeat_path("alpha").symlink_to(target)
    kit.age(registry.heartbeat_path("alpha"))
    report = _sweep(registry)
    assert report.kept_uncertain == 1 and report.candidates == 0
    assert registry.heartbeat_path("alpha").is_symlink() and target.read_bytes() == b"{}"


def test_ended_missing_or_unwitnessed_generations_leave_a_diagnostic(registry, custody_host,
                                                                     collected_events, kit):
    kit.plant_stale(registry, "term", status="terminal")
    kit.plant_stale(registry, "arch", status="archived")
    kit.plant_stale(registry, "gone", record=False)
    kit.plant_stale(registry, "nowit", generation_id="not-a-generation")
    report = _sweep(registry, emit=custody_host.emit)
    assert (report.deleted, report.observations, report.diagnostics) == (4, 0, 4)
    assert sorted(kit.diagnostics(registry)) == ["archived", "missing", "terminal",
                                                 "unwitnessed"]
    assert "lifecycle.sweep_observed" not in collected_events.names()
    # A diagnostic reopens nothing.
    assert registry.read_generation("term").status == "terminal"
    assert registry.read_generation("gone") is None


def test_an_unwitnessed_observation_never_joins_a_generation_found_later(registry, kit):
    kit.plant_stale(registry, "alpha", generation_id="not-a-generation")
    kit.replace_generation(registry, "alpha")  # a live generation exists ...
    heartbeat = registry.read_heartbeat("alpha")
    stale = msgspec.structs.replace(heartbeat, generation_id="not-a-generation",
                                    owner=kit.dead_owner(registry, "alpha"))
    registry.write_heartbeat(stale)
    kit.age(registry.heartbeat_path("alpha"))
    _sweep(registry)
    # ... but the observed heartbeat carried no witness of it.
    assert kit.observations(registry) == [] and kit.diagnostics(registry) == ["unwitnessed"]


def test_keeps_the_cache_when_neither_audit_nor_diagnostic_can_be_written(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    before = capture_file_revision(registry.heartbeat_path("alpha"))
    registry.audit_dir.rmdir()
    registry.audit_dir.write_bytes(b"not a folder")  # every audit write now fails
    report = _sweep(registry)
    assert (report.kept_refused, report.deleted) == (1, 0)
    assert capture_file_revision(registry.heartbeat_path("alpha")).same_file(before)
    _untouched(registry, planted)


def test_a_retained_heartbeat_pin_protects_its_dependents(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    path = registry.heartbeat_path("alpha")
    revision = capture_file_revision(path)

    def collide(_pinned):
        atomic_write(path, b"{}")
        return False

    assert delete_file_if_unchanged(path, revision, collide).outcome == "retained"
    path.unlink()  # the heartbeat is gone; its pinned bytes are still retained
    report = _sweep(registry)
    assert report.dependents_deleted == 0
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    assert registry.prompt_hash_path("alpha").exists()


def test_an_unknown_pin_identity_protects_the_whole_registry(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    private = registry.heartbeats_dir / ".custody"
    private.mkdir(mode=0o700)
    (private / "op_unknown.json").write_bytes(b"garbage")
    (private / "op_unknown.pin").write_bytes(b"some heartbeat, nobody knows whose")
    report = _sweep(registry)
    assert report.protected_folders == 1 and report.candidates == 0
    _untouched(registry, planted)


def test_a_torn_manifest_with_nothing_pinned_does_not_stop_the_sweep(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    private = registry.heartbeats_dir / ".custody"
    private.mkdir(mode=0o700)
    (private / "op_torn.json").write_bytes(b"")  # what a power cut leaves of an unsynced one
    report = _sweep(registry)
    assert report.protected_folders == 0 and report.deleted == 1
    assert not registry.heartbeat_path(planted.instance).exists()
    assert (private / "op_torn.json").exists()  # evidence kept for a person to release


def test_an_unknown_pid_map_pin_protects_only_pid_map_entries(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    private = registry.pid_map_dir / ".custody"
    private.mkdir(mode=0o700)
    (private / "op_unknown.pin").write_bytes(b"?")
    report = _sweep(registry)
    assert report.deleted == 1 and report.dependents_deleted == 1
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    assert not registry.prompt_hash_path("alpha").exists()


def test_prunes_an_orphan_pid_map_entry_whose_owner_stays_absent(registry, kit):
    pid = kit.dead_pid()
    registry.write_pid_map(PidMapEntry(pid=pid, instance="beta"))
    kit.age(registry.pid_map_path(pid))
    registry.write_prompt_hash("beta", "digest")
    kit.age(registry.prompt_hash_path("beta"))
    report = _sweep(registry)
    assert report.dependents_deleted == 2
    assert not registry.pid_map_path(pid).exists()
    assert not registry.prompt_hash_path("beta").exists()
    assert not registry.lock_path("beta").exists()


def test_keeps_a_pid_map_entry_of_a_live_process(registry, kit):
    registry.write_pid_map(PidMapEntry(pid=os.getppid(), instance="beta"))
    kit.age(registry.pid_map_path(os.getppid()))
    report = _sweep(registry)
    assert report.dependents_deleted == 0
    assert registry.pid_map_path(os.getppid()).exists()


def test_a_budget_defers_candidates_to_the_next_sweep(registry, kit):
    for name in ("a1", "a2", "a3"):
        kit.plant_stale(registry, name)
    first = _sweep(registry, max_candidates=1)
    assert (first.deleted, first.deferred) == (1, 2)
    second = _sweep(registry, max_candidates=5)
    assert second.deleted == 2


def test_a_heartbeat_refreshed_between_scan_and_read_is_kept_fresh(registry, kit):
    kit.plant_stale(registry, "alpha")
    hooks = SweepHooks(after_snapshot=lambda _root: kit.refresh_same_generation(registry, "alpha"))
    report = StaleSweep(registry, hooks=hooks).run()
    assert (report.kept_fresh, report.deleted) == (1, 0)
    assert isinstance(registry.read_heartbeat("alpha"), Heartbeat)


def test_manifests_record_the_sweepers_custody_lock(registry, kit):
    kit.plant_stale(registry, "alpha")
    seen = []

    def look(_instance):
        private = registry.heartbeats_dir / ".custody"
        name = next(n for n in os.listdir(private) if n.endswith(".json"))
        seen.append(msgspec.json.decode((private / name).read_bytes(), type=DeletionManifest))

    _sweep(registry, hooks=SweepHooks(before_audit=look))
    assert seen[0].creator.lock == str(registry.lock_path("alpha"))
    assert seen[0].creator.pid == os.getpid()


def test_keeps_files_whose_names_are_not_instances(registry, kit):
    odd = registry.heartbeats_dir / "not an instance!.json"
    odd.write_bytes(b"{}")
    kit.age(odd)
    orphan_hash = registry.prompt_hash_dir / "no such instance?.txt"
    orphan_hash.write_bytes(b"x")
    kit.age(orphan_hash)
    report = _sweep(registry)
    assert report.kept_uncertain == 1 and report.dependents_kept == 1
    assert odd.exists() and orphan_hash.exists()
