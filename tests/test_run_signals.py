"""SIGTERM and SIGINT end ``hostcore run`` and ``run --once`` in bounded time, whatever
a plugin step does: a step that ignores the stop request is abandoned, named, and
the process exits 1, leaving the root's step lock free for the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostcore.steps import STOP_GRACE_SECONDS

# A plugin step that never returns and never looks at host.stop.
HUNG_PLUGIN = """
    import time
    from hostcore import hookimpl
    from hostcore.plugin.registration import WorkerResult

    class Hung:
        name = "hung"
        order = 1

        def run(self, host):
            (host.root / "hung-started").write_text("")
            while True:
                time.sleep(0.05)

    class After:
        name = "after-hung"
        order = 2

        def run(self, host):
            (host.root / "after-ran").write_text("")
            return WorkerResult()

    @hookimpl
    def hostcore_workers(host):
        return [Hung(), After()]
"""

QUICK_PLUGIN = """
    from hostcore import hookimpl
    from hostcore.plugin.registration import WorkerResult

    class Quick:
        name = "quick"

        def run(self, host):
            (host.root / "quick-ran").write_text("")
            return WorkerResult(counts={"ran": 1})

    @hookimpl
    def hostcore_workers(host):
        return Quick()
"""

# What the signal may take beyond the grace: the watcher's poll, the host's close,
# the interpreter's exit, on a busy machine.
SLACK_SECONDS = 10.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root whose built-in sources read empty folders, and no lock wait: a run that
    finds the step lock held fails at once, naming the holder."""
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    (root / "hostcore.toml").write_text(
        "[run]\nlock_wait_seconds = 0\ninterval_seconds = 60\n"
        f'[plugins.claude-code]\nhome = "{home}"\n[plugins.codex]\nhome = "{home}"\n')
    return root


@pytest.fixture
def env_for(fake_site):
    fake_site.add("fake-hung", {"hung": HUNG_PLUGIN})
    fake_site.add("fake-quick", {"quick": QUICK_PLUGIN})

    def env(dist: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(fake_site.folder),
                "HOSTCORE_LOAD_PLUGINS": dist}

    return env


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"hostcore exited {proc.returncode} before {path.name}: "
                                 f"{proc.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("once", [True, False], ids=["once", "loop"])
def test_a_signal_ends_run_within_the_grace_when_a_step_hangs_naming_it(
        root, env_for, signum, once):
    args = [sys.executable, "-m", "hostcore", "--root", str(root), "run",
            *(["--once"] if once else [])]
    proc = subprocess.Popen(args, env=env_for("fake-hung"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(root / "hung-started", proc)
        signalled = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=STOP_GRACE_SECONDS + 60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, stderr
    assert STOP_GRACE_SECONDS - 0.5 <= took < STOP_GRACE_SECONDS + SLACK_SECONDS, took
    assert "step 'hung' failed: StepAbandoned: abandoned, still running 5 s after the " \
           "stop request" in stderr
    assert not (root / "after-ran").exists(), "no step ran after the abandoned one"

    # The lock went with the process: a run at once (no lock wait) gets it.
    after = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                            "--once"], env=env_for("fake-quick"), capture_output=True,
                           text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    assert (root / "quick-ran").exists()
    assert "tick ok" in after.stderr.splitlines()[-1]
