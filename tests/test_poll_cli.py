"""``hostcore poll`` and the poll worker under faults, as cron and a service run them:
a held step lock, a hot-reloaded interval, a disk that fills while a record is dated."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hostcore.files import file_lock

HOLDER = "pid 4242 (hostcore run --once)"


def hostcore(args: list[str], root: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": ""}
    return subprocess.Popen([sys.executable, "-m", "hostcore", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def make_root(tmp_path: Path, config: str) -> Path:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(config)
    return root


# -- the step lock ------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["poll", "--once"], ["run", "--once"]],
                         ids=["poll", "run"])
def test_poll_once_finding_the_step_lock_held_exits_promptly_naming_the_holder(
        tmp_path, command):
    root = make_root(tmp_path, "[run]\nlock_wait_seconds = 0.5\n")
    with file_lock(root / "run.lock", holder=HOLDER):
        started = time.monotonic()
        proc = hostcore(command, root)
        try:
            _, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
        elapsed = time.monotonic() - started
    assert proc.returncode == 1
    last = err.strip().splitlines()[-1]  # one line naming the holder, no traceback
    assert HOLDER in last and "gave up after 0.5 s" in last and "Traceback" not in err
    assert elapsed < 10  # it waited half a second, not for the lock (forever)


def test_the_poll_loop_waiting_for_the_step_lock_stops_on_sigterm(tmp_path):
    root = make_root(tmp_path, "")
    with file_lock(root / "run.lock", holder=HOLDER):
        proc = hostcore(["poll"], root)
        try:
            assert "polling from" in proc.stderr.readline()
            time.sleep(0.5)  # waiting for the lock now
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            assert proc.wait(timeout=10) == 0
            assert time.monotonic() - sent < 2
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# -- a hot-reloaded interval ------------------------------------------------------------------

def test_a_running_poll_loop_picks_up_an_edited_interval(tmp_path):
    root = make_root(tmp_path, "[poll]\ninterval_seconds = 3600\n")
    proc = hostcore(["poll"], root)
    watchdog = threading.Timer(30, proc.kill)  # fail, not hang, if the edit is ignored
    watchdog.start()
    try:
        assert "polling from" in proc.stderr.readline()
        assert "no work-item provider" in proc.stderr.readline()  # the first cycle
        (root / "hostcore.toml").write_text("[poll]\ninterval_seconds = 0.2\n")
        edited = time.monotonic()
        for _ in range(2):  # two more cycles, at the new interval
            assert "no work-item provider" in proc.stderr.readline()
        assert time.monotonic() - edited < 5
    finally:
        watchdog.cancel()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def poll_step(report: Any) -> dict[str, int]:
    (step,) = [s for s in report.steps if s.name == "poll"]
    assert step.ok, step.error
    return dict(step.counts)


def test_the_poll_worker_picks_up_an_edited_interval(make_host, tmp_path, one_item_provider):
    root = make_root(tmp_path, "[poll]\ninterval_seconds = 3600\n")
    host = make_host(one_item_provider(), root=root)
    assert poll_step(host.tick())["listed"] == 1
    assert poll_step(host.tick()) == {"skipped": 1}
    (root / "hostcore.toml").write_text("[poll]\ninterval_seconds = 0.01\n")
    time.sleep(0.05)
    assert poll_step(host.tick())["listed"] == 1


# -- disk full while dating a record ------------------------------------------------------------

DISK_FULL = """
import json, os, subprocess, sys
from pathlib import Path
from hostcore.cli.app import run_cli
from hostcore.plugin.markers import hookimpl
from hostcore.workitems.items import Closure, Listing, ScopeListing, WorkItem, WorkItemRef
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord

root = Path(sys.argv[1])
folder = root / "ledger"
folder.mkdir(parents=True, mode=0o700)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(folder)],
               check=True)
filler = folder / "filler"
filler.touch()  # before the index is built, so filling it later moves no folder mtime
ledger = Ledger(folder)
ledger.write(PortableRecord(ref="a/a#1", poll=PollSection(last_polled_at="2020-01-01T00:00:00Z")))
ledger.write(PortableRecord(ref="a/a#2", poll=PollSection(
    last_polled_at="2020-01-01T00:00:00Z", updated_at="u")))
ledger.close()
with open(filler, "ab") as out:
    try:
        while True:
            out.write(bytes(65536))
            out.flush()
    except OSError:
        pass

class Provider:
    def __init__(self, name, scope, items):
        self.name, self.scope, self.items, self.listed = name, scope, items, 0
        self.__name__ = f"{name}-provider"
    def owns(self, ref): return ref.ref.startswith(self.scope + "#")
    def scope_of(self, ref): return self.scope
    def list_items(self):
        self.listed += 1
        items = tuple(WorkItem(ref=WorkItemRef(f"{self.scope}#{n}"), updated_at="u")
                      for n in self.items)
        return Listing((ScopeListing(scope=self.scope, status="complete", items=items),))
    def closure(self, ref): return Closure(state="open")
    @hookimpl
    def hostcore_providers(self, host): return self

first, second = Provider("first", "a/a", []), Provider("second", "b/b", [])
code = run_cli(["--root", str(root), "poll", "--once"], extra_plugins=[first, second],
               env={"HOSTCORE_LOAD_PLUGINS": ""})
print(json.dumps({"code": code, "second_listed": second.listed,
                  "record": Ledger(folder).path_for("a/a#1").read_text()}))
# The tmpfs goes with this process's mount namespace.
"""


def test_a_full_disk_while_dating_a_record_ends_the_cycle_with_one_line_and_a_summary(
        tmp_path, mount_namespace):
    prefix = mount_namespace
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    child = subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(DISK_FULL),
                            str(root)], capture_output=True, text=True, timeout=120)
    assert child.stdout, child.stderr
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    err = child.stderr
    assert outcome["code"] == 1
    assert "Traceback" not in err
    assert "poll: first: listing complete, 0 listed" in err  # the summary of what was done
    # The line names the record file that could not be written, then why.
    assert re.search(r"poll: first: ledger: \S*/ledger/portable/\S+\.json: No space left on "
                     r"device; the rest of this provider's cycle was skipped", err), err
    assert outcome["second_listed"] == 1 and "poll: second: listing complete" in err
    assert re.search(r"not everything was polled: first: ledger: \S+\.json: No space left "
                     r"on device", err), err
    assert "closureCheckedAt" not in outcome["record"]  # nothing half-written


def test_a_ledger_that_cannot_be_written_fails_the_poll_step_naming_why(
        make_host, tmp_path, one_item_provider):
    root = make_root(tmp_path, "")
    (root / "ledger").mkdir(mode=0o700)
    (root / "ledger" / "portable").write_text("a file where the records' folder belongs")
    host = make_host(one_item_provider(), root=root)
    report = host.tick()
    (step,) = [s for s in report.steps if s.name == "poll"]
    assert not step.ok
    assert step.error.startswith("PollFailed: the ledger could not be written: one: ")
    assert step.error.endswith(".json: Not a directory") and "/ledger/portable/" in step.error
    (summary,) = host.poller.last
    assert summary.listed == 1 and summary.ledger_error.endswith(".json: Not a directory")


def test_status_in_another_process_names_the_scopes_the_last_cycle_could_not_list(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    root = make_root(tmp_path, f'[plugins.task-folder]\nfolders = {{ inbox = "{tasks}", '
                               f'gone = "{tmp_path / "missing"}" }}\n')
    env = {**os.environ, "HOSTCORE_ROOT": str(root), "HOSTCORE_LOAD_PLUGINS": "task-folder"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hostcore", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    poll = run("poll", "--once")
    assert poll.returncode == 1 and "gone (failed)" in poll.stderr, poll.stderr
    status = run("status", "--json")
    assert status.returncode == 0, status.stderr
    poll_status = json.loads(status.stdout)["components"]["worker"]["poll"]
    assert poll_status["last_cycle_unlisted"] == {"task-folder:gone": "failed"}
    assert poll_status["last_cycle"]["scopes_failed"] == 1
