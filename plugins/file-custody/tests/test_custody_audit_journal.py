"""The audit recorder on its own, and how a sweep's records are persisted then batched."""

from __future__ import annotations

import os

from hostcore_file_custody import capture_file_revision, record_live_sweep_observation
from hostcore_file_custody.audit import AuditJournal, AuditRecord, read_audit_records


def _revision(registry, kit, instance):
    return capture_file_revision(registry.heartbeat_path(instance))


def test_records_for_the_live_witnessed_generation_only(registry, kit):
    planted = kit.plant_stale(registry, "alpha")
    observed = _revision(registry, kit, "alpha")
    for witness, expected in ((None, "unwitnessed"), ("gen_other", "stale"),
                              (planted.generation_id, None)):
        outcome = record_live_sweep_observation(registry, "alpha", observed=observed,
                                                expected_generation_id=witness)
        assert outcome.reason == expected and outcome.recorded is (expected is None)
    assert kit.observations(registry) == [planted.generation_id]


def test_a_journal_persists_each_record_at_once_and_batches_them_on_seal(registry, kit):
    kit.plant_stale(registry, "alpha")
    observed = _revision(registry, kit, "alpha")
    journal = AuditJournal(registry)
    for n in range(3):
        journal.append(AuditRecord(kind="sweep_observed", record_id=f"r{n}", instance="alpha",
                                   generation_id=None, observed=observed, recorded_at=0.0))
    assert len(os.listdir(registry.audit_dir)) == 3  # persisted before any seal
    journal.seal()
    assert len(os.listdir(registry.audit_dir)) == 1
    records, unreadable = read_audit_records(registry)
    assert [r.record_id for r in records] == ["r0", "r1", "r2"] and unreadable == 0
    journal.seal()  # idempotent
    assert len(os.listdir(registry.audit_dir)) == 1


def test_a_record_left_both_single_and_batched_is_read_once(registry, kit):
    kit.plant_stale(registry, "alpha")
    observed = _revision(registry, kit, "alpha")
    record = AuditRecord(kind="sweep_observed", record_id="r0", instance="alpha",
                         generation_id=None, observed=observed, recorded_at=0.0)
    first, second = AuditJournal(registry), AuditJournal(registry)
    first.append(record)
    second.append(record)
    second.seal()  # a crash between a batch write and the single files' removal
    records, _ = read_audit_records(registry)
    assert [r.record_id for r in records] == ["r0"]
    (registry.audit_dir / "broken.json").write_bytes(b"[{")
    assert read_audit_records(registry)[1] == 1
