"""The seven regressions of the stale sweep, each driven through a hook at its exact
interleaving point. Writers in the hooks run in the sweep's thread and reuse its
custody, as a nested synchronous call would."""

from __future__ import annotations

from hostcore_file_custody import (
    GenerationRecord,
    Heartbeat,
    HeartbeatRegistry,
    PidMapEntry,
    StaleSweep,
    SweepHooks,
    current_owner,
)


def _heartbeat(registry: HeartbeatRegistry, instance: str) -> Heartbeat | None:
    return registry.read_heartbeat(instance)


def _no_pins_left(registry: HeartbeatRegistry, kit) -> None:
    for folder in registry.cache_dirs.values():
        assert kit.private_entries(folder) == []


def test_keeps_a_heartbeat_refreshed_immediately_before_unlink(registry, custody_host,
                                                               collected_events, kit):
    planted = kit.plant_stale(registry, "alpha")
    published: list[bytes] = []
    hooks = SweepHooks(before_unlink=lambda inst: published.append(
        kit.refresh_same_generation(registry, inst)))

    report = StaleSweep(registry, emit=custody_host.emit, hooks=hooks).run()

    assert published, "the hook must have run"
    assert registry.heartbeat_path("alpha").read_bytes() == published[0]
    assert report.deleted == 1  # the stale revision, pinned, and only it
    # The owner is present again once each dependent is pinned: both are put back.
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    assert registry.prompt_hash_path("alpha").exists()
    assert report.dependents_deleted == 0
    assert kit.observations(registry) == [planted.generation_id]
    assert collected_events.names().count("lifecycle.sweep_observed") == 1
    _no_pins_left(registry, kit)


def test_does_not_attribute_a_stale_observation_to_a_generation_replaced_during_its_audit(
    registry, custody_host, collected_events, kit
):
    planted = kit.plant_stale(registry, "alpha")
    replacement: list[tuple[str, bytes]] = []
    hooks = SweepHooks(before_audit_write=lambda inst: replacement.append(
        kit.replace_generation(registry, inst)))

    StaleSweep(registry, emit=custody_host.emit, hooks=hooks).run()

    new_generation, new_bytes = replacement[0]
    assert kit.observations(registry) == []  # neither the old nor the replacement generation
    assert "lifecycle.sweep_observed" not in collected_events.names()
    assert kit.diagnostics(registry) == ["stale"]
    unrecorded = collected_events.named("custody.heartbeat_sweep_unrecorded")
    assert [e.attributes for e in unrecorded] == [{"reason": "stale", "persisted": True}]
    assert registry.heartbeat_path("alpha").read_bytes() == new_bytes
    record = registry.read_generation("alpha")
    assert record.generation_id == new_generation and record.status == "live"
    assert new_generation != planted.generation_id


def test_keeps_a_heartbeat_refreshed_while_the_sweep_audit_is_recorded(registry, custody_host,
                                                                      kit):
    planted = kit.plant_stale(registry, "alpha")
    published: list[bytes] = []
    hooks = SweepHooks(before_audit_write=lambda inst: published.append(
        kit.refresh_same_generation(registry, inst)))

    report = StaleSweep(registry, emit=custody_host.emit, hooks=hooks).run()

    assert registry.heartbeat_path("alpha").read_bytes() == published[0]
    # The observation is provisional and belongs to the generation it observed.
    assert kit.observations(registry) == [planted.generation_id]
    assert registry.read_generation("alpha").status == "live"
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    assert registry.prompt_hash_path("alpha").exists()
    assert report.dependents_deleted == 0
    _no_pins_left(registry, kit)


def test_keeps_a_same_generation_heartbeat_refreshed_after_the_stale_read(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    published: list[bytes] = []
    hooks = SweepHooks(after_stale_read=lambda inst: published.append(
        kit.refresh_same_generation(registry, inst)))

    report = StaleSweep(registry, hooks=hooks).run()

    assert registry.heartbeat_path("alpha").read_bytes() == published[0]
    assert _heartbeat(registry, "alpha").generation_id == planted.generation_id
    assert (report.deleted, report.kept_changed) == (0, 1)
    assert kit.observations(registry) == [] and kit.diagnostics(registry) == []
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    assert registry.prompt_hash_path("alpha").exists()
    _no_pins_left(registry, kit)


def test_keeps_a_replacement_generation_written_after_the_stale_read(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    replacement: list[tuple[str, bytes]] = []
    hooks = SweepHooks(after_stale_read=lambda inst: replacement.append(
        kit.replace_generation(registry, inst)))

    report = StaleSweep(registry, hooks=hooks).run()

    new_generation, new_bytes = replacement[0]
    assert registry.heartbeat_path("alpha").read_bytes() == new_bytes
    assert _heartbeat(registry, "alpha").generation_id == new_generation != planted.generation_id
    assert (report.deleted, report.kept_changed) == (0, 1)
    assert kit.observations(registry) == []
    assert registry.read_pid_map(planted.pid).instance == "alpha"
    _no_pins_left(registry, kit)


def test_rechecks_an_owner_absent_from_the_earlier_directory_snapshot_before_pruning_its_pid_map(
    registry, kit
):
    pid = kit.dead_pid()
    registry.write_pid_map(PidMapEntry(pid=pid, instance="beta"))
    kit.age(registry.pid_map_path(pid))
    before = registry.pid_map_path(pid).read_bytes()
    registry.write_generation(GenerationRecord(instance="beta", generation_id="gen_beta",
                                               status="live", epoch=1, changed_at=0.0))
    published: list[bytes] = []

    def owner_publishes(path: str) -> None:
        # The scan saw no heartbeat for beta; beta's session publishes one now.
        published.append(kit.refresh_same_generation(registry, "beta"))

    report = StaleSweep(registry, hooks=SweepHooks(after_dependent_pin=owner_publishes)).run()

    assert published, "the pid-map entry must have been pinned"
    assert registry.pid_map_path(pid).read_bytes() == before
    assert registry.heartbeat_path("beta").read_bytes() == published[0]
    assert report.dependents_deleted == 0 and report.dependents_kept == 1
    _no_pins_left(registry, kit)


def test_keeps_a_pid_map_entry_reassigned_after_its_old_owner_was_read(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    pid_map_path = str(registry.pid_map_path(planted.pid))

    def reassign(path: str) -> None:
        if path == pid_map_path and registry.read_pid_map(planted.pid).instance == "alpha":
            # The PID now runs another session, which publishes its own entry.
            registry.write_pid_map(PidMapEntry(pid=planted.pid, instance="gamma"))

    report = StaleSweep(registry, hooks=SweepHooks(after_dependent_read=reassign)).run()

    assert report.deleted == 1
    assert not registry.heartbeat_path("alpha").exists()
    assert registry.read_pid_map(planted.pid).instance == "gamma"
    assert not registry.prompt_hash_path("alpha").exists()
    assert report.dependents_kept == 1 and report.dependents_deleted == 1
    assert current_owner().pid != planted.pid
    _no_pins_left(registry, kit)
