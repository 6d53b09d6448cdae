"""Writers and sweeps interleaved at random: no live heartbeat is ever lost.

A *live* heartbeat is one a writer refreshed or replaced (by the model) and that
has not been let go stale since. Writers run outside sweeps and, once per sweep,
inside one at a random interleaving point, reusing custody as nested calls do.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import msgspec
from hostcore_file_custody import (
    HeartbeatRegistry,
    StaleSweep,
    SweepHooks,
    pending_custody,
)
from hostcore_file_custody.audit import read_audit_records
from hostcore_file_custody.testing import (
    age,
    dead_owner,
    plant_stale,
    refresh_same_generation,
    replace_generation,
)
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

INSTANCES = st.sampled_from(("a", "b", "c"))
WRITES = st.sampled_from(("refresh", "replace"))
POINTS = st.sampled_from(("after_snapshot", "after_stale_read", "before_audit",
                          "before_audit_write", "before_unlink", "after_dependent_read",
                          "after_dependent_pin"))


class HeartbeatRaces(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="custody-races-"))
        self.registry = HeartbeatRegistry(self.tmp / "registry").ensure()
        self.live: dict[str, bytes] = {}
        self.stale_generations: set[str] = set()

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _write(self, instance: str, kind: str) -> None:
        record = self.registry.read_generation(instance)
        if kind == "refresh" and record is not None and record.status == "live":
            self.live[instance] = refresh_same_generation(self.registry, instance)
        else:
            self.live[instance] = replace_generation(self.registry, instance)[1]

    @rule(instance=INSTANCES)
    def a_session_dies(self, instance: str) -> None:
        if instance not in self.live:
            planted = plant_stale(self.registry, instance)
            self.stale_generations.add(planted.generation_id)

    @rule(instance=INSTANCES, kind=WRITES)
    def a_writer_publishes(self, instance: str, kind: str) -> None:
        self._write(instance, kind)

    @rule(instance=INSTANCES)
    def a_live_heartbeat_goes_stale(self, instance: str) -> None:
        heartbeat = self.registry.read_heartbeat(instance)
        if instance not in self.live or heartbeat is None:
            return
        owner = dead_owner(self.registry, instance)
        self.registry.write_heartbeat(msgspec.structs.replace(
            heartbeat, owner=owner, refreshed_at=time.time() - 3600))
        age(self.registry.heartbeat_path(instance))
        del self.live[instance]
        self.stale_generations.add(heartbeat.generation_id)

    @rule(instance=INSTANCES, kind=WRITES, point=POINTS)
    def a_sweep_races_a_writer(self, instance: str, kind: str, point: str) -> None:
        fired: list[str] = []

        def writer(_subject: str) -> None:
            if not fired:
                fired.append(point)
                self._write(instance, kind)

        StaleSweep(self.registry, hooks=SweepHooks(**{point: writer})).run()

    @rule()
    def a_quiet_sweep(self) -> None:
        StaleSweep(self.registry).run()

    @invariant()
    def no_live_heartbeat_is_lost(self) -> None:
        for instance, data in self.live.items():
            assert self.registry.heartbeat_path(instance).read_bytes() == data

    @invariant()
    def observations_name_only_generations_observed_stale(self) -> None:
        records, unreadable = read_audit_records(self.registry)
        assert unreadable == 0
        for record in records:
            if record.kind == "sweep_observed":
                assert record.generation_id in self.stale_generations

    @invariant()
    def no_deletion_is_left_half_done(self) -> None:
        for folder in self.registry.cache_dirs.values():
            pending = pending_custody(folder)
            assert not pending.unknown and pending.manifests == pending.retained


HeartbeatRaces.TestCase.settings = settings(
    max_examples=40, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestNoLiveHeartbeatIsLost = HeartbeatRaces.TestCase
