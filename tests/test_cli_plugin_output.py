"""What plugin code prints never reaches a command's stdout, and a command run with
stdout closed still does its work: machine-readable output stays machine-readable
for the scripts and cron jobs that read it. Each test runs a real ``hostcore``
process, so descriptor 1 is a real one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# Prints when imported, when it registers its worker and when the worker reports its
# status: the places a plugin author's leftover debugging output shows up.
PRINTING_PLUGIN = """
    from hostcore import hookimpl
    from hostcore.plugin import WorkerResult

    print("imported the printing plugin")

    class Printing:
        name = "printing"

        def run(self, host):
            print("running the printing worker")
            return WorkerResult(counts={"ran": 1})

        def status(self):
            print("reporting the printing worker's status")
            return {"reports": 1}

    @hookimpl
    def hostcore_workers(host):
        print("registering the printing worker")
        return Printing()
"""


def hostcore(root: Path, env: dict[str, str], *args: str,
             shell_redirect: str = "") -> subprocess.CompletedProcess[str]:
    """``hostcore --root ROOT ARGS``, its stdout redirected by ``shell_redirect``
    (``>&-`` closes it) when given."""
    command = [sys.executable, "-m", "hostcore", "--root", str(root), *args]
    if shell_redirect:
        command = ["sh", "-c", f'exec "$@" {shell_redirect}', "sh", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def printing_env(tmp_path: Path, fake_site) -> dict[str, str]:
    fake_site.add("fake-printing", {"printing": PRINTING_PLUGIN})
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
            "PYTHONPATH": str(fake_site.folder), "HOSTCORE_LOAD_PLUGINS": "fake-printing"}


@pytest.mark.parametrize("args", [("status", "--json"), ("--quiet", "status", "--json"),
                                  ("plugins", "--json"), ("run", "--once", "--json")],
                         ids=["status-lean", "status-click", "plugins", "run"])
def test_what_a_plugin_prints_stays_off_a_json_report(tmp_path, printing_env, args):
    # Before, the import's and the registration's lines came out ahead of the JSON
    # of every command, and the status hook's inside status's.
    done = hostcore(tmp_path / "root", printing_env, *args)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report
    assert "imported the printing plugin" in done.stderr
    assert "registering the printing worker" in done.stderr
    if "status" in args:
        assert report["components"]["worker"]["printing"]["reports"] == 1
        assert "reporting the printing worker's status" in done.stderr
    if "run" in args:
        assert "running the printing worker" in done.stderr


@pytest.mark.parametrize("args", [("run", "--once"), ("run", "--once", "--json"),
                                  ("status", "--json"), ("plugins", "--json"),
                                  ("--quiet", "status")],
                         ids=["run", "run-json", "status-lean", "plugins", "status-click"])
def test_a_command_with_stdout_closed_does_its_work(tmp_path, printing_env, args):
    # cron's `>&-`: before, every one of these ended in an AttributeError traceback
    # (exit 1) as the output guard flushed a stdout Python had left as None.
    root = tmp_path / "root"
    done = hostcore(root, printing_env, *args, shell_redirect=">&-")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    if "run" in args:
        assert "running the printing worker" in done.stderr
        # The tick happened: the next status (stdout open) shows it.
        status = json.loads(hostcore(root, printing_env, "status", "--json").stdout)
        assert status["last_tick"]["ok"] is True


def test_what_a_status_hook_prints_stays_off_status_watch(tmp_path, printing_env):
    # On a pipe, each refresh is a block of plain lines: the hook's line, printed at
    # every refresh, was among them.
    command = [sys.executable, "-m", "hostcore", "--root", str(tmp_path / "root"), "status",
               "--watch", "--interval", "0.2"]
    watch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**printing_env, "COLUMNS": "80"},
                             stdin=subprocess.DEVNULL)
    lines: list[str] = []
    try:
        assert watch.stdout is not None
        for line in watch.stdout:  # blocks until a line comes: no sleep
            lines.append(line)
            if sum(li.startswith("hostcore status --watch: every ") for li in lines) == 2:
                break
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0, err
    assert not [line for line in lines if line.startswith("reporting")]
    assert err.count("reporting the printing worker's status") >= 2
