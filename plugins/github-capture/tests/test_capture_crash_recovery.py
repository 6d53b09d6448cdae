"""SIGKILL a real hostcore process mid-pass and right after the swap's write: the next
run resumes or completes correctly and never captures an unconfirmed repository."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

from hostcore.evidence.inputs import CLASS_LIST_FILE, ClassList
from hostcore.evidence.store import STORE_FILE_NAME, EvidenceRow, Store

CHILD = Path(__file__).parent / "capture_crash_child.py"
PERMITTED = [f"octo/open{i}" for i in range(10)]
SECRET = [f"octo/secret{i}" for i in range(5)]
BUDGET = 10


def run_child(root, fake_gh, *args):
    env = {**fake_gh.env, "HOSTCORE_LOAD_PLUGINS": ""}
    return subprocess.run([sys.executable, str(CHILD), str(root), "--budget", str(BUDGET),
                           *args], env=env, capture_output=True, text=True, timeout=120)


def summary(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def events(root, name):
    path = root / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e["attributes"] for e in map(json.loads, lines) if e["name"] == name]


def sidecar(root):
    return StateFile(root / "plugins" / "github-capture" / SIDECAR_FILE, SidecarState).load()


@pytest.fixture
def world(tmp_path, fake_gh, make_events):
    """A root whose inventory holds every repository, captured once; then the
    secret directory is marked local-only, so a pass of 60 permitted rows is due."""
    root = tmp_path / "root"
    root.mkdir()
    store = Store(root / STORE_FILE_NAME)
    rows = []
    for i in range(60):  # secrets interleaved all through the history
        repo = PERMITTED[i % len(PERMITTED)]
        rows.append(EvidenceRow(partition=f"part{i % 3}", source_id="claude",
                                directory="/w/open", git_remote=f"https://github.com/{repo}"))
        if i % 4 == 0:
            secret = SECRET[i % len(SECRET)]
            rows.append(EvidenceRow(partition=f"part{i % 3}", source_id="claude",
                                    directory="/w/secret",
                                    git_remote=f"git@github.com:{secret}.git"))
    store.append(rows)
    store.close()
    for n, repo in enumerate(PERMITTED + SECRET):
        fake_gh.repo(repo, make_events(repo, 2, first_id=10 * n + 1), poll_interval=1)
    summary(run_child(root, fake_gh, "--max-ticks", "100"))
    assert set(sidecar(root).repos) == set(PERMITTED + SECRET)
    assert fake_gh.polled_repos() == set(PERMITTED + SECRET)
    fake_gh.clear_calls()
    (root / "events.jsonl").unlink()
    # Every repository is due again at once: the runs below capture as they go.
    (root / "plugins" / "github-capture" / "capture.json").unlink()
    ClassList(root / CLASS_LIST_FILE).set("/w/secret", "local-only")
    return root


def test_sigkill_mid_pass_resumes_and_never_captures_an_unconfirmed_repository(world, fake_gh):
    killed = run_child(world, fake_gh, "--kill-after-save", "2")
    assert killed.returncode == -signal.SIGKILL
    record = sidecar(world).revalidation
    assert record is not None and record.positions_read == 2 * BUDGET
    assert set(record.confirmed) <= set(PERMITTED)
    # The first tick captured what its slice had confirmed, and nothing else.
    assert fake_gh.polled_repos()
    assert fake_gh.polled_repos() <= set(record.confirmed)

    # Killed again while streaming, before this slice persisted anything.
    killed = run_child(world, fake_gh, "--kill-after-rows", "5")
    assert killed.returncode == -signal.SIGKILL
    assert sidecar(world).revalidation.positions_read == 2 * BUDGET

    finished = summary(run_child(world, fake_gh))
    # The resumed run read only what the persisted slices had not.
    assert finished["rows_yielded"] == 60 - record.rows_read
    state = sidecar(world)
    assert state.revalidation is None and set(state.repos) == set(PERMITTED)
    assert [e["trigger"] for e in events(world, "capture.revalidation_started")] == \
        ["fingerprint"]
    completed = events(world, "capture.revalidation_completed")
    assert [(c["rows_read"], c["retired"]) for c in completed] == [(60, len(SECRET))]
    assert fake_gh.polled_repos() == set(PERMITTED)  # every run's calls together


def test_sigkill_right_after_the_swap_write_leaves_a_complete_inventory(world, fake_gh):
    killed = run_child(world, fake_gh, "--kill-after-swap")
    assert killed.returncode == -signal.SIGKILL
    state = sidecar(world)
    assert state.revalidation is None
    assert set(state.repos) == set(PERMITTED)
    assert state.policy_fingerprint is not None and state.derived_at is not None
    assert all(mark.caught_up for mark in state.partitions.values())
    # Earlier ticks captured what their slices had confirmed; the swap's tick was
    # killed before its capture step.
    assert fake_gh.polled_repos() <= set(PERMITTED)

    finished = summary(run_child(world, fake_gh))
    assert finished["rows_yielded"] == 0  # nothing to redo: the swap was whole
    assert events(world, "capture.revalidation_started") == [
        {"trigger": "fingerprint", "unit": "rows", "prior_inventory": 15, "restarted": False}]
    assert fake_gh.polled_repos() == set(PERMITTED)  # every run's calls together
