"""Dependents' private unlinks run in parallel batches (:mod:`.unlinker`): a sweep killed
among them loses nothing and the next pass finishes the job; an unlink the system refuses
is counted, its bytes retained for recovery, and the other files still go."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import StaleSweep, SweepHooks, pending_custody
from hostcore_file_custody.private import DeletionManifest
from hostcore_file_custody.unlinker import INLINE_STEPS, SLOW_STEP_SECONDS, Unlinker
from hostcore_file_custody.worker import run_custody_pass

from hostcore.testing import require_tool

CHILD = Path(__file__).parent / "helpers" / "custody_kill_child.py"
# Four stale sessions: eight dependents, a batch large enough to run in threads.
INSTANCES = ["alpha", "bravo", "charlie", "delta"]
assert 2 * len(INSTANCES) > INLINE_STEPS


def _kill_sweep_at(root: Path, point: str, only: str, others: float) -> str:
    child = subprocess.Popen([sys.executable, str(CHILD), "sweep", str(root), point, "600",
                              only, str(others)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        line = child.stdout.readline().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    return line


def _nothing_left(registry, kit, planted) -> None:
    for item in planted:
        assert not registry.heartbeat_path(item.instance).exists()
        assert not registry.pid_map_path(item.pid).exists()
        assert not registry.prompt_hash_path(item.instance).exists()
    for folder in registry.cache_dirs.values():
        assert kit.private_entries(folder) == []


def test_a_sweep_killed_among_its_parallel_unlinks_loses_nothing_and_the_next_pass_ends_it(
        registry, kit):
    planted = [kit.plant_stale(registry, name) for name in INSTANCES]
    # Every prompt hash's unlink pauses in its thread; the pid-map entries' go on, each
    # waiting as on a slow disk (the first one's wait sends the batch to threads).
    line = _kill_sweep_at(registry.root, "before_dependent_unlink",
                          f"{os.sep}prompt-hash{os.sep}", others=2 * SLOW_STEP_SECONDS)
    assert line == "paused before_dependent_unlink"
    assert not any(registry.heartbeat_path(item.instance).exists() for item in planted)
    assert pending_custody(registry.prompt_hash_dir).sources == {
        registry.prompt_hash_path(item.instance).name for item in planted}
    pending_pid_maps = len(pending_custody(registry.pid_map_dir).sources)

    report = run_custody_pass(registry)

    # The dead sweeper's pins went back (nothing lived at their paths) and the sweep
    # pruned them as orphans: every dependent is gone, each deleted once.
    assert report.recovery["restored"] == len(planted) + pending_pid_maps
    assert report.sweep.dependents_deleted == len(planted) + pending_pid_maps
    assert report.sweep.unhandled == 0 and report.sweep.dependents_kept == 0
    _nothing_left(registry, kit, planted)
    assert sorted(kit.observations(registry)) == sorted(item.generation_id for item in planted)


def _chattr(flag: str, path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("chattr")
    assert tool is not None, "chattr is missing (Debian: apt-get install e2fsprogs)"
    return subprocess.run([tool, flag, str(path)], capture_output=True, text=True, timeout=30)


def _pin_of(folder: Path, source_name: str) -> Path:
    """The pin in ``folder``'s private folder whose manifest names ``source_name``."""
    private = folder / ".custody"
    for name in os.listdir(private):
        if name.startswith("op_") and name.endswith(".json"):
            manifest = msgspec.json.decode((private / name).read_bytes(),
                                           type=DeletionManifest)
            if manifest.source_name == source_name:
                return private / f"{manifest.op}.pin"
    raise AssertionError(f"no manifest names {source_name}")


def test_an_unlink_the_system_refuses_is_counted_and_the_other_files_still_go(
        registry, kit, tmp_path):
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    # Where CI requires every tool ($HOSTCORE_REQUIRED_TOOLS), no immutable flag fails.
    require_tool("chattr", "run as root on a filesystem with the immutable flag (ext4)",
                 found=shutil.which("chattr") is not None and os.geteuid() == 0
                 and _chattr("+i", probe).returncode == 0)
    _chattr("-i", probe)
    planted = [kit.plant_stale(registry, name) for name in INSTANCES]
    target = registry.prompt_hash_path("charlie")
    frozen: list[Path] = []

    def freeze_target(path: str) -> None:
        # In the unlinker's thread, just before the private unlink: the system refuses it.
        if path == str(target):
            pin = _pin_of(registry.prompt_hash_dir, target.name)
            assert _chattr("+i", pin).returncode == 0
            frozen.append(pin)

    try:
        report = StaleSweep(registry, hooks=SweepHooks(
            before_dependent_unlink=freeze_target)).run()
        assert len(frozen) == 1
        assert report.deleted == len(planted)
        assert report.dependents_deleted == 2 * len(planted) - 1
        assert report.dependents_kept == 1  # counted, and skipped
        # Its bytes are retained beside their manifest, for recovery; the others went.
        assert frozen[0].read_bytes() == b"prompt-digest"
        manifest = frozen[0].with_suffix(".json")
        assert msgspec.json.decode(manifest.read_bytes(), type=DeletionManifest).state == \
            "retained"
        assert not target.exists()
        assert [p for p in planted if registry.pid_map_path(p.pid).exists()] == []
        assert [p.instance for p in planted
                if registry.prompt_hash_path(p.instance).exists()] == []
    finally:
        for pin in frozen:
            _chattr("-i", pin)

    # Once the system allows it, the next pass puts the bytes back and prunes them.
    after = run_custody_pass(registry)
    assert after.recovery["restored"] == 1
    assert after.sweep.dependents_deleted == 1
    _nothing_left(registry, kit, planted)


def test_a_batch_whose_first_step_waits_runs_the_rest_in_parallel_results_in_order():
    workers = 4
    together = threading.Barrier(workers, timeout=120)  # broken unless 4 run at once
    delivered: list[int] = []
    threads: set[str] = set()

    def step(n: int) -> int:
        if n == 0:
            threads.add(threading.current_thread().name)
        else:
            together.wait()
        return n

    # Every first step counts as slow here: the rest go to the threads.
    with Unlinker[int](workers=workers, slow_step=0.0) as unlinker:
        for n in range(1 + 2 * workers):
            unlinker.submit(lambda n=n: step(n), delivered.append)
        assert delivered == []  # queued, not run, until the batch drains
    assert delivered == list(range(1 + 2 * workers))
    assert threads == {threading.main_thread().name}  # the timed first step ran here


def test_a_batch_of_quick_steps_runs_in_the_draining_thread():
    ran_in: set[str] = set()
    delivered: list[int] = []

    def step(n: int) -> int:
        ran_in.add(threading.current_thread().name)
        return n

    with Unlinker[int](slow_step=60.0) as unlinker:
        for n in range(4 * INLINE_STEPS):
            unlinker.submit(lambda n=n: step(n), delivered.append)
    assert delivered == list(range(4 * INLINE_STEPS))
    assert ran_in == {threading.current_thread().name}


def test_an_unlinker_batch_runs_every_step_before_raising_one_steps_error():
    ran: list[int] = []
    delivered: list[int] = []
    unlinker = Unlinker[int](workers=2, slow_step=0.0)

    def step(n: int) -> int:
        ran.append(n)
        if n == 1:
            raise RuntimeError("a bug in one step")
        return n

    for n in range(INLINE_STEPS + 4):
        unlinker.submit(lambda n=n: step(n), delivered.append)
    with pytest.raises(RuntimeError, match="a bug in one step"):
        unlinker.drain()
    assert sorted(ran) == list(range(INLINE_STEPS + 4))
    assert delivered == []  # no result is delivered from a batch that raised


def test_an_unlinker_runs_a_full_batch_at_once_without_waiting_for_the_drain():
    delivered: list[int] = []
    unlinker = Unlinker[int](workers=2, batch=INLINE_STEPS + 2)
    for n in range(INLINE_STEPS + 2):
        unlinker.submit(lambda n=n: n, delivered.append)
    assert delivered == list(range(INLINE_STEPS + 2))
