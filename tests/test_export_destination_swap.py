"""A destination deleted or swapped for an older backup while ``hostcore export`` runs.

Real processes: a ``hostcore export`` of many rows runs while this process
deletes its folder (``rm -rf``) or swaps in a copy taken earlier. The export
notices at its next push that the folder is not the one, at the position, it
resumed from, resumes from what the folder holds, republishes governance, and
ends with every row held exactly once; ``hostcore status`` then agrees.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.evidence.store import EvidenceRow
from hostcore.export.exporter import local_governance
from hostcore.host import Host

ROWS = 200_000


@pytest.fixture
def root(export_root) -> Path:
    return export_root(EvidenceRow(partition="sessions", source_id="claude",
                                   directory="/work/a", payload={"n": i, "text": "x" * 40})
                       for i in range(ROWS))


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "HOSTCORE_ROOT": str(root),
            "HOSTCORE_LOAD_PLUGINS": "hostcore-directory-destination"}


def held_bytes(outbox: Path) -> int:
    total = 0
    for segment in outbox.glob("main/*/*.jsonl"):
        with contextlib.suppress(FileNotFoundError):  # being swapped
            total += segment.stat().st_size
    return total


def wait_for_bytes(outbox: Path, export: subprocess.Popen[str], size: int) -> None:
    deadline = time.monotonic() + 120
    while held_bytes(outbox) < size:
        assert export.poll() is None, "the export ended before the folder was touched"
        assert time.monotonic() < deadline, "the export wrote nothing for two minutes"
        time.sleep(0.002)


def start_export(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hostcore", "export", "--json"],
                            env=env_for(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(export: subprocess.Popen[str]) -> dict:
    out, err = export.communicate(timeout=180)
    assert export.returncode == 0, err
    return json.loads(out)


def check_every_row_once_and_status_agrees(root: Path, outbox: Path) -> None:
    host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
    try:
        origin = host.store.instance_id
        positions = [r.position for r in DirectoryDestination(outbox).read_rows("main", origin)]
        assert positions == list(range(1, ROWS + 1))
        published = json.loads((outbox / "main" / origin / "ref.json").read_text())
        assert published == local_governance(host).governance()
        export = host.status()["components"]["worker"]["export"]
        assert (export["position"], export["rows_behind"]) == (ROWS, 0)
        assert export["conflicts"] == "none"
    finally:
        host.close()


def test_rm_rf_of_the_folder_during_an_export_leaves_no_gap(root, tmp_path):
    outbox = tmp_path / "outbox"
    export = start_export(root)
    try:
        wait_for_bytes(outbox, export, 1024 * 1024)
        # One rm -rf, racing the export's writes (it may say "Directory not empty").
        subprocess.run(["rm", "-rf", str(outbox)], capture_output=True, timeout=60)
        assert export.poll() is None, "the export ended before the folder was deleted"
        summary = finish(export)
    finally:
        if export.poll() is None:
            export.kill()
    assert summary["resumed"] >= 1 and summary["done"] is True
    check_every_row_once_and_status_agrees(root, outbox)


def test_an_older_backup_swapped_in_during_an_export_is_resumed_from(root, tmp_path):
    outbox, backup = tmp_path / "outbox", tmp_path / "backup"
    export = start_export(root)
    try:
        wait_for_bytes(outbox, export, 1024 * 1024)
        shutil.copytree(outbox, backup)  # taken while rows are written: maybe torn at the end
        wait_for_bytes(outbox, export, held_bytes(backup) + 2 * 1024 * 1024)
        outbox.rename(tmp_path / "replaced")
        backup.rename(outbox)
        assert export.poll() is None, "the export ended before the backup was swapped in"
        summary = finish(export)
    finally:
        if export.poll() is None:
            export.kill()
    assert summary["resumed"] >= 1 and summary["done"] is True
    check_every_row_once_and_status_agrees(root, outbox)
