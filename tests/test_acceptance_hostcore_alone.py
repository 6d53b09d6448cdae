"""Acceptance: the hostcore wheel alone, in a clean venv with no plugin installed, works.

The venv has no access to the environment running the tests: hostcore's wheel from
this tree's wheelhouse (scripts/build-dist) is installed with its declared
dependencies by pip, from the wheelhouse alone, as a user installing the package
would. So a missing dependency or an import of a plugin from the host fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def alone(tmp_path_factory, wheelhouse) -> Path:
    venv = tmp_path_factory.mktemp("alone") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # No pip configuration and no index: the wheelhouse is all there is.
    env = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(wheelhouse), "hostcore"],
                   check=True, capture_output=True, timeout=600, env=env)
    return venv


def run(venv: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "hostcore"), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin"})


def test_hostcore_alone_lists_only_its_built_ins(alone, tmp_path):
    result = run(alone, tmp_path, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    plugins = json.loads(result.stdout)
    assert plugins and {p["status"] for p in plugins} == {"builtin"}
    assert {p["distribution"] for p in plugins} == {"hostcore"}


def test_hostcore_alone_runs_a_tick_polls_and_reports(alone, tmp_path):
    tick = run(alone, tmp_path, "run", "--once", "--json")
    assert tick.returncode == 0, tick.stderr
    report = json.loads(tick.stdout)
    assert report["ok"] is True
    assert {s["name"] for s in report["steps"]} >= {"ingest", "poll"}
    poll = run(alone, tmp_path, "poll", "--once", "--json")
    assert poll.returncode == 0, poll.stderr
    status = run(alone, tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["root"] == str(tmp_path)
    evidence = run(alone, tmp_path, "evidence", "--json")
    assert json.loads(evidence.stdout)["rows"] == 0


def test_hostcore_alone_does_not_ship_the_plugins(alone):
    probe = subprocess.run(
        [str(alone / "bin" / "python"), "-c",
         "import importlib.util as u; print([m for m in ('hostcore_gh', 'hostcore_file_custody',"
         " 'hostcore_github_capture') if u.find_spec(m)])"],
        capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.strip() == "[]"
