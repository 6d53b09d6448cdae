"""SIGKILL the exporter (real subprocesses) and run it again: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import ExportRow
from hostcore.host import Host

ROWS_PER_DIRECTORY = 40_000
DIRECTORIES = ("/work/a", "/work/b", "/work/secret")


@pytest.fixture
def root(export_root) -> Path:
    """A state root with rows in three directories, one of them local-only."""
    return export_root(
        (EvidenceRow(partition="sessions", source_id="claude", directory=directory,
                     payload={"n": i, "text": "x" * 80})
         for directory in DIRECTORIES for i in range(ROWS_PER_DIRECTORY)),
        then=lambda host: host.policy.input("class-list").set("/work/secret", "local-only"))


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "HOSTCORE_ROOT": str(root),
            "HOSTCORE_LOAD_PLUGINS": "hostcore-directory-destination"}


def permitted_positions() -> list[int]:
    # Positions are assigned in append order: directory by directory.
    secret = DIRECTORIES.index("/work/secret")
    return [i * ROWS_PER_DIRECTORY + n + 1 for i in range(len(DIRECTORIES)) if i != secret
            for n in range(ROWS_PER_DIRECTORY)]


def exported(outbox: Path) -> list[ExportRow]:
    """Every row the folder holds, from whichever store (the test root has one)."""
    destination = DirectoryDestination(outbox)
    return [row for origin in sorted(p.name for p in (outbox / "main").iterdir() if p.is_dir())
            for row in destination.read_rows("main", origin)]


def export(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcore", "export", "--json"],
                          env=env_for(root), capture_output=True, text=True, timeout=120)


def check_exactly_once(outbox: Path) -> None:
    rows = exported(outbox)
    assert [r.position for r in rows] == permitted_positions()
    assert "/work/secret" not in {r.directory for r in rows}


def test_sigkill_during_export_then_rerun_loses_and_duplicates_nothing(root, tmp_path):
    outbox = tmp_path / "outbox"
    killed_with_partial_output = 0
    for delay in (0.0, 0.05, 0.15):
        before = sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))
        proc = subprocess.Popen([sys.executable, "-m", "hostcore", "export"],
                                env=env_for(root), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        # Kill once this run has appended something: the push loop is under way.
        while time.monotonic() < deadline and proc.poll() is None:
            size = sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))
            if size > before:
                time.sleep(delay)
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        if proc.wait() == -signal.SIGKILL:
            held = sum(p.read_bytes().count(b"\n") for p in outbox.glob("main/*/*.jsonl"))
            killed_with_partial_output += held < len(permitted_positions())
    assert killed_with_partial_output >= 1, "no kill landed before the export finished"
    final = export(root)
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["done"] is True
    check_exactly_once(outbox)


DRIVER = textwrap.dedent("""
    import os, signal, sys
    from hostcore_directory_destination import destination as module
    from hostcore.cli.app import run_cli

    mode = sys.argv[1]
    real_append, real_push = module.DirectoryDestination._append, module.DirectoryDestination.push
    pushes = 0

    def torn_append(self, origin_dir, tail, rows):
        global pushes
        pushes += 1
        if pushes == 2:
            data = module._encoder.encode_lines(rows)
            segment = tail.segment
            with open(segment, "ab") as handle:
                handle.write(data[: len(data) // 2 + 7])
                handle.flush()
                os.fsync(handle.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        real_append(self, origin_dir, tail, rows)

    def push_then_die(self, batch):
        result = real_push(self, batch)
        if batch.sets.context:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    if mode == "torn":
        module.DirectoryDestination._append = torn_append
    else:
        module.DirectoryDestination.push = push_then_die
    sys.exit(run_cli(["export"]))
""")


def run_driver(root: Path, mode: str) -> int:
    return subprocess.run([sys.executable, "-c", DRIVER, mode], env=env_for(root),
                          capture_output=True, text=True, timeout=120).returncode


def test_kill_in_the_middle_of_a_segment_write_is_cut_and_resumed(root, tmp_path):
    outbox = tmp_path / "outbox"
    assert run_driver(root, "torn") == -signal.SIGKILL
    (segment,) = outbox.glob("main/*/*.jsonl")
    assert not segment.read_bytes().endswith(b"\n")  # the kill tore a line
    final = export(root)
    assert final.returncode == 0, final.stderr
    check_exactly_once(outbox)


def test_kill_after_a_governance_write_before_the_host_recorded_it(root, tmp_path):
    outbox = tmp_path / "outbox"
    first = export(root)
    assert first.returncode == 0, first.stderr
    host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
    try:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory="/work/a", payload={"late": True})
                          for _ in range(3))
        host.policy.input("class-list").set("/work/other", "local-only")  # context moves
    finally:
        host.close()
    assert run_driver(root, "governance") == -signal.SIGKILL
    rerun = export(root)
    assert rerun.returncode == 0, rerun.stderr  # the write already stands: no conflict
    rows = exported(outbox)
    positions = [r.position for r in rows]
    assert positions == [*permitted_positions(), *range(3 * ROWS_PER_DIRECTORY + 1,
                                                      3 * ROWS_PER_DIRECTORY + 4)]
