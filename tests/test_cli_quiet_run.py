"""``hostcore -q run``: no per-tick lines, no start or stop notes; a failed step is
still said, and still sets the exit status. Real ``hostcore`` subprocesses, with a
real (hand-installed) plugin whose worker fails every tick beside one that works."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TICK_LINE = re.compile(r"^tick (ok|failed)", re.MULTILINE)


def environment(site: Any, dists: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env.update({"PYTHONPATH": str(site.folder), "HOSTCORE_LOAD_PLUGINS": dists})
    return env


def make_root(tmp_path: Path, interval: float = 3600) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(f"[run]\ninterval_seconds = {interval}\n")
    return root


def once(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args,
                           "run", "--once"], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture
def good_site(fake_site, plugin_sources):
    fake_site.add("fake-good", {"good": plugin_sources("good")})
    return fake_site


@pytest.fixture
def failing_site(fake_site, plugin_sources):
    fake_site.add("fake-good", {"good": plugin_sources("good")})
    fake_site.add("fake-boom", {"boom": plugin_sources("failing")})
    return fake_site


def test_quiet_run_once_prints_nothing_for_a_tick_that_went_well(tmp_path, good_site):
    root, env = make_root(tmp_path), environment(good_site, "fake-good")
    loud = once(root, env)
    assert loud.returncode == 0, loud.stderr
    assert TICK_LINE.search(loud.stderr), loud.stderr  # what -q takes away
    quiet = once(root, env, "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")
    # The tick did run: its report is kept for `status`.
    report = json.loads((root / "last-tick.json").read_text())
    assert [s["name"] for s in report["steps"] if s["name"] == "hello"] == ["hello"]


def test_quiet_run_once_still_names_a_failed_step_and_exits_1(tmp_path, failing_site):
    root, env = make_root(tmp_path), environment(failing_site, "fake-good,fake-boom")
    done = once(root, env, "--quiet")
    assert done.returncode == 1
    assert "hostcore: step 'boom' failed: RuntimeError: the boom worker fails" in done.stderr
    assert not TICK_LINE.search(done.stderr), done.stderr


def test_quiet_run_once_keeps_the_json_lines_it_reports(tmp_path, good_site):
    root, env = make_root(tmp_path), environment(good_site, "fake-good")
    done = once(root, env, "-q")
    assert done.returncode == 0
    quiet_json = subprocess.run([sys.executable, "-m", "hostcore", "-q", "--root", str(root),
                                 "run", "--once", "--json"], capture_output=True, text=True,
                                env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert quiet_json.returncode == 0, quiet_json.stderr
    (line,) = quiet_json.stdout.splitlines()
    assert json.loads(line)["ok"] is True
    assert quiet_json.stderr == ""


def last_tick(root: Path) -> bytes | None:
    try:
        return (root / "last-tick.json").read_bytes()
    except FileNotFoundError:
        return None


def wait_for_ticks(root: Path, process: subprocess.Popen[str], ticks: int,
                   before: bytes | None) -> None:
    """Until ``ticks`` last-tick reports other than ``before`` were seen under
    ``root`` (the quiet process says nothing to wait on); fails if the process ends."""
    seen: set[bytes | None] = {before}
    deadline = time.monotonic() + 240  # generous: a loaded 2-core machine
    while len(seen) < ticks + 1:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no tick came"
        current = last_tick(root)
        if current is not None:
            seen.add(current)
        time.sleep(0.05)


def long_run(root: Path, env: dict[str, str], *args: str) -> str:
    """stderr of a `hostcore run` stopped by SIGINT after two ticks."""
    before = last_tick(root)
    process = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root),
                                *args, "run"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env,
                               stdin=subprocess.DEVNULL)
    try:
        wait_for_ticks(root, process, 2, before)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return err


def test_a_quiet_long_run_says_only_what_failed(tmp_path, failing_site):
    root = make_root(tmp_path, interval=0.2)
    env = environment(failing_site, "fake-good,fake-boom")
    # The exit status is left alone: the signal may land mid-tick, skipping the
    # failing step of that last tick (run --once pins the status above).
    loud = long_run(root, env)
    assert "hostcore: running on" in loud and "hostcore: stopped" in loud
    assert len(TICK_LINE.findall(loud)) >= 2, loud

    err = long_run(root, env, "-q")
    lines = err.splitlines()
    assert len(lines) >= 2, err
    assert set(lines) == {"hostcore: step 'boom' failed: RuntimeError: the boom worker fails"}
