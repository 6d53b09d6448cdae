"""A withheld row never leaves, even when the policy changes while an export runs.

Every running read of the export seam compares the policy fingerprint between
fetch chunks and re-evaluates scopes when it moved, so a change made by another
process withholds every row the export reads after it. What can still leave is
what the export had already read when the change landed: the batch being pushed,
the batch being read, and the rest of the seam's fetch chunk, so no withheld row
past ``position at the change + 2 * batch + fetch chunk`` reaches the
destination (docs/freshness.md, "Withheld rows never leave").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostcore_directory_destination.plugin as directory_plugin
import pytest
from hostcore_directory_destination.destination import DirectoryDestination

from hostcore.evidence.inputs import CLASS_LIST_FILE, ClassList
from hostcore.evidence.seam import FETCH_ROWS, ExportSeam
from hostcore.evidence.store import EvidenceRow
from hostcore.export.batch import ExportBatch
from hostcore.export.destinations import select_destination
from hostcore.export.exporter import BATCH_ROWS, Exporter
from hostcore.export.ref import Ref

# Rows of the real-process test: a second or so of export here.
ROWS = 240_000
# Destination bytes written before the export is paused and the policy changed.
TRIGGER_BYTES = 2 * 1024 * 1024


def alternating_rows(count: int, start: int = 0):
    """Rows alternating between /srv/a (source claude) and /srv/b (source codex)."""
    return (EvidenceRow(partition="sessions", source_id=("claude", "codex")[i % 2],
                        directory=("/srv/a", "/srv/b")[i % 2], payload={"n": i})
            for i in range(start, start + count))


def leaked_past(rows, bound: int, *, directory: str | None = None,
                source: str | None = None) -> list[int]:
    return [r.position for r in rows if r.position > bound
            and (directory is None or r.directory == directory)
            and (source is None or r.source_id == source)]


# -- a second real hostcore process changes the policy --------------------------------


@pytest.fixture
def big_root(export_root) -> Path:
    return export_root(alternating_rows(ROWS))


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "HOSTCORE_ROOT": str(root),
            "HOSTCORE_LOAD_PLUGINS": "hostcore-directory-destination"}


def segment_bytes(outbox: Path) -> int:
    return sum(p.stat().st_size for p in outbox.glob("main/*/*.jsonl"))


def test_a_policy_change_by_another_process_stops_a_running_export_within_the_bound(
        big_root, tmp_path):
    outbox = tmp_path / "outbox"
    env = env_for(big_root)
    export = subprocess.Popen([sys.executable, "-m", "hostcore", "export", "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while segment_bytes(outbox) < TRIGGER_BYTES and export.poll() is None:
            assert time.monotonic() < deadline, "the export wrote nothing for two minutes"
            time.sleep(0.002)
        # Freeze the export wherever it is (mid-read, mid-push), so that however slow
        # this machine is, the change lands while it runs; then let it go on.
        export.send_signal(signal.SIGSTOP)
        try:
            policy = subprocess.run([sys.executable, "-m", "hostcore", "policy", "local-only",
                                     "/srv/b"], env=env, capture_output=True, text=True,
                                    timeout=120)
            assert policy.returncode == 0, policy.stderr
            (origin,) = [p.name for p in (outbox / "main").iterdir() if p.is_dir()]
            destination = DirectoryDestination(outbox)
            at_change = destination.published("main", origin).content
        finally:
            export.send_signal(signal.SIGCONT)
        _, err = export.communicate(timeout=120)
    finally:
        if export.poll() is None:
            export.kill()
    assert export.returncode == 0, err
    bound = at_change + 2 * BATCH_ROWS + FETCH_ROWS
    assert bound < ROWS - 10_000, (
        f"the export was at {at_change} of {ROWS} rows when the change landed: too late "
        "for this test to show anything; raise ROWS")
    rows = list(destination.read_rows("main", origin))
    assert leaked_past(rows, bound, directory="/srv/b") == []
    # /srv/a kept flowing to the end, and every row is held once.
    assert rows[-1].position == ROWS - 1  # the last /srv/a row (/srv/b holds the last one)
    positions = [r.position for r in rows]
    assert positions == sorted(set(positions))


# -- the same, in process, with small batches -------------------------------------------

BATCH = 100
FETCH = 50


class ChangesPolicyMidway(DirectoryDestination):
    """A folder destination that, while its ``at_push``-th push is in flight, has
    something else change the policy (before writing that push)."""

    def __init__(self, path: Path, change, at_push: int) -> None:
        super().__init__(path)
        self.change, self.at_push = change, at_push
        self.pushes = 0
        self.position_at_change: int | None = None

    def push(self, batch: ExportBatch) -> Ref:
        self.pushes += 1
        if batch.rows and self.pushes == self.at_push:
            self.position_at_change = batch.after
            self.change()
        return super().push(batch)


@pytest.fixture
def small_batches(make_host, tmp_path):
    """A host whose seam fetches FETCH rows per chunk, with 4,000 alternating rows."""
    host = make_host(directory_plugin, config={
        "plugins": {"directory-destination": {"path": str(tmp_path / "outbox")}}})
    host.store.append(alternating_rows(4_000))
    host.seam = ExportSeam(host.store, host.policy, fetch_rows=FETCH)
    return host


def export_with(host, change, at_push: int = 6) -> tuple[ChangesPolicyMidway, list]:
    destination = ChangesPolicyMidway(select_destination(host).path, change, at_push)
    summary = Exporter(host, destination, batch_rows=BATCH).run()
    assert summary.done
    rows = list(destination.read_rows("main", host.store.instance_id))
    return destination, rows


def test_a_policy_change_mid_export_in_process_leaves_at_most_the_rows_already_read(
        small_batches):
    host = small_batches
    # Another writer of the class list (a separate object, as another process is).
    other = ClassList(host.root / CLASS_LIST_FILE)
    destination, rows = export_with(host, lambda: other.set("/srv/b", "local-only"))
    bound = destination.position_at_change + 2 * BATCH + FETCH
    assert leaked_past(rows, bound, directory="/srv/b") == []
    assert host.seam.policy_changes >= 1
    assert rows[-1].position == 3_999  # /srv/a rows kept flowing


def test_an_opt_out_written_by_another_process_takes_effect_at_the_next_batch(
        small_batches):
    host = small_batches
    env = {**os.environ, "HOSTCORE_ROOT": str(host.root), "HOSTCORE_LOAD_PLUGINS": ""}

    def opt_out_codex() -> None:
        done = subprocess.run([sys.executable, "-m", "hostcore", "policy", "opt-out", "codex"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    destination, rows = export_with(host, opt_out_codex)
    bound = destination.position_at_change + 2 * BATCH + FETCH
    assert leaked_past(rows, bound, source="codex") == []
    assert rows[-1].position == 3_999


def test_a_new_ignore_dotfile_withholds_later_rows_and_moves_the_context(make_host, tmp_path):
    project = tmp_path / "projects" / "client"
    project.mkdir(parents=True)
    host = make_host(directory_plugin, config={
        "plugins": {"directory-destination": {"path": str(tmp_path / "outbox")}}})
    host.policy.input("ignore-dotfiles").ttl = 0  # look at folders on every check

    def add(count: int) -> None:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory=str(project), payload={"n": n})
                          for n in range(count))

    add(3)
    host.freshness.check()
    first = Exporter(host, select_destination(host)).run()
    assert first.rows == 3
    assert host.freshness.check() == []  # the first identities seen are not a change
    (project / ".hostcoreignore").touch()
    add(2)
    assert "context" in Exporter(host, select_destination(host)).report().since_last_push.moved()
    second = Exporter(host, select_destination(host)).run()
    assert (second.rows, second.carried) == (0, ["context"])
    assert host.freshness.check() == ["context"]
