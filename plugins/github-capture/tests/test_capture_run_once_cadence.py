"""A nothing-new `hostcore run --once` with repositories in the inventory asks GitHub
nothing while no repository is due: capture keeps its own cadence across processes."""

from __future__ import annotations

import os
import subprocess
import sys

from hostcore.evidence.rows import EvidenceRow

REMOTE = "git@github.com:{}.git"


def _run_once(root, fake_gh) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **fake_gh.env, "HOSTCORE_ROOT": str(root)}
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                           "--once"], capture_output=True, text=True, env=env, timeout=300)


def test_a_second_run_once_before_any_repository_is_due_makes_no_request(
        make_host, fake_gh, make_events, tmp_path):
    for name in ("octo/tool", "octo/lib"):
        fake_gh.repo(name, make_events(name, 3))
    root = tmp_path / "root"
    host = make_host(root=root)
    host.store.append([EvidenceRow(partition="claude", source_id="claude", directory="/w",
                                   key=f"k{i}", git_remote=REMOTE.format(name))
                       for i, name in enumerate(("octo/tool", "octo/lib"))])
    host.close()
    first = _run_once(root, fake_gh)
    assert first.returncode == 0, first.stderr[-2000:]
    assert fake_gh.polled_repos() == {"octo/tool", "octo/lib"}
    fake_gh.clear_calls()
    second = _run_once(root, fake_gh)
    assert second.returncode == 0, second.stderr[-2000:]
    assert fake_gh.calls() == []
