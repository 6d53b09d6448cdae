"""A sweep writes its intent manifests into the files of manifests it dropped (spares)
instead of a new file per deletion; the protocol's published states stay the same, so
a process killed while a spare holds the next manifest loses nothing."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hostcore_file_custody import HeartbeatRegistry, StaleSweep, pending_custody
from hostcore_file_custody.maintenance import is_leftover
from hostcore_file_custody.private import (
    MANIFEST_SUFFIX,
    RECOVERY_LOCK_NAME,
    DeletionManifest,
    ManifestSpares,
    operations,
)
from hostcore_file_custody.revision import open_dir
from hostcore_file_custody.unlinker import BATCH_STEPS
from hostcore_file_custody.worker import run_custody_pass

FRESH_MANIFEST = re.compile(r"^\.op_\w+\.json\.\w+\.tmp$")
SPARE = re.compile(r"^\.spare\.\w+\.tmp$")


def _dead_pid(i: int) -> int:
    # PIDs above pid_max never name a process: owners surely dead, without a spawn each.
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1 + i


def _plant(registry: HeartbeatRegistry, kit: Any, count: int) -> list[Any]:
    return [kit.plant_stale(registry, f"ses-{i:04d}", pid=_dead_pid(i)) for i in range(count)]


def _hidden(registry: HeartbeatRegistry) -> list[str]:
    return sorted(name for folder in registry.cache_dirs.values()
                  if (folder / ".custody").exists()
                  for name in os.listdir(folder / ".custody") if name.startswith("."))


class _Opens:
    """Names ``os.open`` is called with in this process, and whether it creates."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.created: list[str] = []
        self.opened: list[str] = []
        real: Callable[..., int] = os.open

        def counting(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            name = os.path.basename(os.fsdecode(path))
            (self.created if flags & os.O_CREAT else self.opened).append(name)
            return real(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", counting)


def test_a_sweep_creates_manifest_files_for_its_deletions_in_flight_not_for_each(
        registry, kit, monkeypatch):
    stale = 3 * BATCH_STEPS  # 576 deletions with their manifests: far more than in flight
    planted = _plant(registry, kit, stale)
    opens = _Opens(monkeypatch)

    report = StaleSweep(registry).run()

    assert report.deleted == stale and report.dependents_deleted == 2 * stale
    fresh = [n for n in opens.created if FRESH_MANIFEST.match(n)]
    rewritten = [n for n in opens.opened if SPARE.match(n)]
    # Every deletion published its manifest, in a new file or in a dropped one's ...
    assert len(fresh) + len(rewritten) == 3 * stale
    # ... and new files only for as many as are in flight at once, not one per deletion.
    assert len(fresh) <= 2 * BATCH_STEPS, len(fresh)
    assert not any(SPARE.match(n) for n in opens.created)  # a spare is never created
    # The sweep leaves no spare behind, and everything it deleted is gone.
    assert _hidden(registry) == []
    for session in planted:
        assert not registry.heartbeat_path(session.instance).exists()
        assert not registry.pid_map_path(session.pid).exists()
    assert sorted(kit.observations(registry)) == sorted(s.generation_id for s in planted)


def _manifest(op: str, size: int = 0) -> tuple[str, bytes]:
    data = msgspec.json.encode({"op": op, "padding": "x" * size})
    return f"{op}{MANIFEST_SUFFIX}", data


@pytest.fixture
def private_fd(tmp_path):
    folder = tmp_path / ".custody"
    folder.mkdir(mode=0o700)
    fd = open_dir(folder)
    yield fd
    os.close(fd)


def test_a_rewritten_spare_holds_exactly_the_next_manifest_and_the_dropped_name_is_gone(
        tmp_path, private_fd):
    spares = ManifestSpares()
    first, long_bytes = _manifest("op_1", size=300)
    spares.write(private_fd, first, long_bytes)
    inode = os.stat(first, dir_fd=private_fd).st_ino
    spares.drop(private_fd, first)
    assert operations(private_fd) == (set(), set())  # dropped: as good as unlinked
    second, short_bytes = _manifest("op_2")

    spares.write(private_fd, second, short_bytes)

    # The same file, now holding the shorter manifest and nothing of the longer one.
    assert os.stat(second, dir_fd=private_fd).st_ino == inode
    assert (tmp_path / ".custody" / second).read_bytes() == short_bytes
    assert (spares.created, spares.rewritten) == (1, 1)
    spares.discard()
    assert os.listdir(tmp_path / ".custody") == [second]


def test_a_spare_that_is_no_longer_a_plain_file_of_ours_alone_is_never_written(
        tmp_path, private_fd):
    spares = ManifestSpares()
    name, data = _manifest("op_1")
    spares.write(private_fd, name, data)
    spares.drop(private_fd, name)
    (spare,) = [n for n in os.listdir(tmp_path / ".custody") if SPARE.match(n)]
    outside = tmp_path / "outside"
    os.link(tmp_path / ".custody" / spare, outside)  # a second name for the spare's file
    kept = outside.read_bytes()
    second, second_bytes = _manifest("op_2")

    spares.write(private_fd, second, second_bytes)

    assert outside.read_bytes() == kept  # the linked file was not touched
    assert (tmp_path / ".custody" / second).read_bytes() == second_bytes
    assert os.stat(second, dir_fd=private_fd).st_ino != outside.stat().st_ino
    assert (spares.created, spares.rewritten) == (2, 0)


def test_a_spare_pruned_meanwhile_gives_way_to_a_new_file(tmp_path, private_fd):
    spares = ManifestSpares()
    name, data = _manifest("op_1")
    spares.write(private_fd, name, data)
    spares.drop(private_fd, name)
    for leftover in os.listdir(tmp_path / ".custody"):
        assert is_leftover(leftover)  # what maintenance prunes by age
        os.unlink(tmp_path / ".custody" / leftover)
    second, second_bytes = _manifest("op_2")

    spares.write(private_fd, second, second_bytes)

    assert (tmp_path / ".custody" / second).read_bytes() == second_bytes
    assert (spares.created, spares.rewritten) == (2, 0)


def test_a_folder_keeps_no_more_spares_than_its_limit(tmp_path, private_fd):
    spares = ManifestSpares(limit=2)
    for i in range(5):
        name, data = _manifest(f"op_{i}")
        spares.write(private_fd, name, data)
    for i in range(5):
        spares.drop(private_fd, f"op_{i}{MANIFEST_SUFFIX}")
    assert len([n for n in os.listdir(tmp_path / ".custody") if SPARE.match(n)]) == 2


def test_a_sweep_killed_while_a_spare_holds_the_next_manifest_loses_nothing(registry, kit,
                                                                          kill_at):
    # More stale sessions than one unlinker batch: the first batch's dropped manifests
    # are spares by the time the next heartbeats are taken.
    stale = BATCH_STEPS + 6
    planted = _plant(registry, kit, stale)
    with registry.start_session("live-one", prompt_hash="p"):
        live_bytes = registry.heartbeat_path("live-one").read_bytes()
        assert kill_at("sweep", str(registry.root), "after_spare_rewrite") == \
            "paused after_spare_rewrite"
        # Killed there: the spare holds a whole manifest under its hidden name, which
        # no reader takes for an operation; the manifest's own name is not there yet.
        held = [(folder, msgspec.json.decode((folder / ".custody" / n).read_bytes(),
                                             type=DeletionManifest))
                for folder in registry.cache_dirs.values() if (folder / ".custody").exists()
                for n in os.listdir(folder / ".custody") if SPARE.match(n)]
        # One of them is the manifest being written: its file is still at its live path.
        assert any((folder / m.source_name).exists() for folder, m in held)
        assert not any((folder / ".custody" / f"{m.op}{MANIFEST_SUFFIX}").exists()
                       for folder, m in held)
        for folder in registry.cache_dirs.values():
            pending = pending_custody(folder)
            assert not pending.unknown and pending.malformed == 0

        report = run_custody_pass(registry)

        # Every stale session is gone, each observed before its deletion; the live one
        # is untouched; nothing is pending; what the kill left is a leftover by age.
        assert report.sweep.kept_live == 0 and report.sweep.unhandled == 0
        for session in planted:
            assert not registry.heartbeat_path(session.instance).exists()
            assert not registry.pid_map_path(session.pid).exists()
            assert not registry.prompt_hash_path(session.instance).exists()
        assert set(kit.observations(registry)) == {s.generation_id for s in planted}
        assert registry.heartbeat_path("live-one").read_bytes() == live_bytes
        for folder in registry.cache_dirs.values():
            assert kit.private_entries(folder) == []
            assert pending_custody(folder).sources == frozenset()
        left = [n for n in _hidden(registry) if n != RECOVERY_LOCK_NAME]
        assert left and all(SPARE.match(n) and is_leftover(n) for n in left), left
