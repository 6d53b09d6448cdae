"""Generation custody and the heartbeat writers: lock cost, reentrancy, independence,
no-clobber leases and generation witnesses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import msgspec
import pytest
from hostcore_file_custody import (
    LOCKS,
    CustodyRefused,
    Heartbeat,
    HeartbeatWriter,
    LiveCoordinationWriter,
    WitnessError,
    with_generation_custody,
)


def _locks_taken(action):
    before = LOCKS.acquisitions
    result = action()
    return LOCKS.acquisitions - before, result


def test_a_session_start_takes_exactly_one_lock(registry):
    taken, session = _locks_taken(lambda: registry.start_session("alpha", prompt_hash="p1"))
    with session:
        assert taken == 1
        heartbeat = registry.read_heartbeat("alpha")
        assert heartbeat.generation_id == session.generation_id
        assert heartbeat.owner.pid == os.getpid()
        assert registry.read_pid_map(os.getpid()).instance == "alpha"
        assert registry.prompt_hash_path("alpha").read_text() == "p1"
        assert registry.read_generation("alpha").status == "live"


def test_a_sessions_own_writes_reuse_its_custody(registry):
    with registry.start_session("alpha") as session:
        taken, _ = _locks_taken(session.refresh)
        assert taken == 1  # the in-process mutex only: no kernel lock
        with session.custody() as outer:
            nested_taken, _ = _locks_taken(session.refresh)
            assert not outer.nested and outer.lifetime
        assert nested_taken == 0
        assert registry.read_heartbeat("alpha").seq == 2


def test_nested_custody_in_the_same_thread_is_reused(registry):
    with with_generation_custody(registry, "alpha") as outer:
        taken, nested = _locks_taken(lambda: _enter_nested(registry))
    assert not outer.nested and nested and taken == 0


def _enter_nested(registry):
    with registry.with_generation_custody("alpha") as inner:
        return inner.nested


def test_a_second_session_of_a_live_instance_is_refused(registry):
    with registry.start_session("alpha"):
        with pytest.raises(CustodyRefused) as refused:
            registry.start_session("alpha", wait_seconds=0)
        assert refused.value.reason == "held"


def test_a_closed_session_frees_its_instance_and_ends_its_generation(registry):
    session = registry.start_session("alpha")
    generation = session.generation_id
    session.close()
    assert not registry.heartbeat_path("alpha").exists()
    assert not registry.pid_map_path(os.getpid()).exists()
    assert registry.read_generation("alpha").status == "terminal"
    assert not registry.lock_path("alpha").exists()
    with registry.start_session("alpha", continue_generation=generation) as again:
        # A terminal generation is never resumed: a new one replaces it.
        assert again.generation_id != generation


def test_resuming_a_live_generation_keeps_it(registry):
    first = registry.start_session("alpha")
    generation = first.generation_id
    first.close(end_generation=False)
    with registry.start_session("alpha", continue_generation=generation) as resumed:
        assert resumed.generation_id == generation
        assert registry.read_generation("alpha").epoch == 1


def test_unrelated_instances_make_progress_independently(registry):
    """Thread A holds alpha's custody until thread B, inside beta's, lets it go."""
    b_inside = threading.Event()
    results: dict[str, bool] = {}

    def hold_alpha():
        with registry.with_generation_custody("alpha"):
            results["a"] = b_inside.wait(timeout=5)

    def work_on_beta():
        with registry.with_generation_custody("beta"):
            b_inside.set()
            results["b"] = True

    a = threading.Thread(target=hold_alpha)
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=work_on_beta)
    b.start()
    a.join(timeout=10)
    b.join(timeout=10)
    assert results == {"a": True, "b": True}


def test_another_thread_is_refused_a_standalone_custody_of_the_same_instance(registry):
    inside, release = threading.Event(), threading.Event()

    def hold():
        with registry.with_generation_custody("alpha"):
            inside.set()
            release.wait(timeout=5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(timeout=5)
    try:
        with pytest.raises(CustodyRefused) as refused, registry.with_generation_custody("alpha"):
            pass
        assert refused.value.reason == "held"
    finally:
        release.set()
        holder.join(timeout=5)
    with registry.with_generation_custody("alpha") as custody:
        assert not custody.nested


def test_threads_of_a_session_take_its_custody_in_turn(registry):
    with registry.start_session("alpha") as session:
        order: list[str] = []
        entered = threading.Event()

        def slow_writer():
            with session.custody():
                entered.set()
                time.sleep(0.1)
                order.append("slow")

        writer = threading.Thread(target=slow_writer)
        writer.start()
        assert entered.wait(timeout=5)
        with session.custody():
            order.append("second")
        writer.join(timeout=5)
        assert order == ["slow", "second"]


def _hold_lock_in_child(lock_path):
    script = textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(lock_path)!r}, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_the_lease_refuses_a_live_competing_owner_whatever_its_age(registry):
    lock_path = registry.lock_path("alpha")
    child = _hold_lock_in_child(lock_path)
    try:
        os.utime(lock_path, (0, 0))  # an ancient lease is still a held one
        with pytest.raises(CustodyRefused) as refused, registry.with_generation_custody("alpha"):
            pass
        assert refused.value.reason == "held"
    finally:
        child.kill()
        child.wait()
    # The kernel dropped the dead owner's lock: custody is free now.
    with registry.with_generation_custody("alpha") as custody:
        assert not custody.nested


@pytest.mark.parametrize("shape", ["directory", "symlink"])
def test_the_lease_refuses_an_uncertain_lock_file(registry, tmp_path, shape):
    lock_path = registry.lock_path("alpha")
    if shape == "directory":
        lock_path.mkdir()
    else:
        target = tmp_path / "elsewhere.lock"
        target.write_bytes(b"")
        lock_path.symlink_to(target)
    with pytest.raises(CustodyRefused) as refused, registry.with_generation_custody("alpha"):
        pass
    assert refused.value.reason == "uncertain"


def test_same_owner_publication_with_a_replaced_witness_is_refused(registry):
    with registry.start_session("alpha") as session:
        old_witness = session.generation_id
        session.replace_generation()
        current = registry.heartbeat_path("alpha").read_bytes()
        with pytest.raises(WitnessError) as refused:
            HeartbeatWriter(registry).publish("alpha", old_witness, lambda hb: hb)
        assert refused.value.reason == "stale"
        assert registry.heartbeat_path("alpha").read_bytes() == current


def test_a_nested_replacement_during_projection_refuses_the_outer_publication(registry):
    with registry.start_session("alpha") as session:
        witness = session.generation_id
        replaced: list[str] = []

        def project(current: Heartbeat | None) -> Heartbeat:
            # Nested work in the same thread reuses custody and replaces the generation.
            replaced.append(session.replace_generation())
            return msgspec.structs.replace(current, payload={"projected": True})

        with pytest.raises(WitnessError) as refused:
            LiveCoordinationWriter(registry).publish("alpha", witness, project)
        assert refused.value.reason == "stale"
        heartbeat = registry.read_heartbeat("alpha")
        assert heartbeat.generation_id == replaced[0] and heartbeat.payload == {}


def test_a_projection_is_published_when_its_witness_holds(registry):
    with registry.start_session("alpha") as session:
        published = session.publish_projection(
            lambda current: msgspec.structs.replace(current, payload={"turn": 3}))
        assert registry.read_heartbeat("alpha") == published
        assert published.payload == {"turn": 3}


def test_a_missing_witness_requires_repair_before_publication(registry):
    with registry.start_session("alpha") as session:
        before = registry.heartbeat_path("alpha").read_bytes()
        with pytest.raises(WitnessError) as refused:
            HeartbeatWriter(registry).publish("alpha", None, lambda hb: hb)
        assert refused.value.reason == "missing"
        assert registry.heartbeat_path("alpha").read_bytes() == before
        session.generation_id = None
        with pytest.raises(WitnessError):
            session.refresh()
        witness = session.repair()
        assert witness == registry.read_generation("alpha").generation_id
        assert session.refresh().generation_id == witness


def test_an_ended_generation_refuses_publication_until_repaired(registry):
    with registry.start_session("alpha") as session:
        ended = session.generation_id
        session.end_generation("archived")
        with pytest.raises(WitnessError) as refused:
            session.refresh()
        assert refused.value.reason == "ended"
        assert session.repair() != ended
        assert registry.read_generation("alpha").status == "live"


def test_pid_map_healing_republishes_a_lost_entry(registry):
    with registry.start_session("alpha") as session:
        registry.pid_map_path(os.getpid()).unlink()
        assert session.heal_pid_map() is True
        assert registry.read_pid_map(os.getpid()).instance == "alpha"
        assert session.heal_pid_map() is False


def test_a_session_can_close_from_inside_its_own_custody(registry):
    session = registry.start_session("alpha")
    with session.custody():
        session.close()
    assert session.closed and not registry.heartbeat_path("alpha").exists()
    with pytest.raises(CustodyRefused) as refused:
        session.refresh()
    assert refused.value.reason == "closed"
    with registry.start_session("alpha") as again:
        assert again.generation_id != session.generation_id
