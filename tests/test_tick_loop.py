"""The tick loop: backlog cadence, stop requests honoured between steps, clean SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from hostcore import hookimpl
from hostcore.host import BACKLOG_INTERVAL_SECONDS
from hostcore.plugin.registration import StepFailed, WorkerResult


class RecordingStop:
    """Stands in for ``threading.Event``: records each wait, stops after ``waits`` of them."""

    def __init__(self, waits: int) -> None:
        self.waits: list[float] = []
        self.limit = waits

    def is_set(self) -> bool:
        return len(self.waits) >= self.limit

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return self.is_set()


class Scripted:
    """A worker reporting ``pending`` from a script, one value per run."""

    name = "scripted"

    def __init__(self, pending: list[bool]) -> None:
        self.pending = list(pending)

    def run(self, host):
        return WorkerResult(pending=self.pending.pop(0))


def plugin_with(*workers):
    class Plugin:
        __name__ = "tick-test"

        @hookimpl
        def hostcore_workers(self):
            return workers

    return Plugin()


def test_pending_work_shortens_the_next_wait(make_host):
    host = make_host(plugin_with(Scripted([True, True, False, True])),
                     config={"run": {"interval_seconds": 30}})
    stop = RecordingStop(waits=4)
    host.run(stop, backlog_interval=0.5)
    assert stop.waits == [0.5, 0.5, 30, 0.5]


def test_backlog_cadence_defaults_to_the_named_constant(make_host):
    host = make_host(plugin_with(Scripted([True, False])),
                     config={"run": {"interval_seconds": 600}})
    stop = RecordingStop(waits=2)
    host.run(stop)
    assert stop.waits == [BACKLOG_INTERVAL_SECONDS, 600]


def test_backlog_never_waits_longer_than_the_interval(make_host):
    host = make_host(plugin_with(Scripted([True])), config={"run": {"interval_seconds": 0.2}})
    stop = RecordingStop(waits=1)
    host.run(stop, backlog_interval=5)
    assert stop.waits == [0.2]


def test_max_ticks_returns_the_last_report(make_host):
    host = make_host(plugin_with(Scripted([True, False])))
    report = host.run(threading.Event(), max_ticks=2, backlog_interval=0.01)
    assert report is not None and not report.pending


def test_a_stop_request_skips_the_remaining_steps_of_the_tick(make_host, collected_events):
    stop = threading.Event()
    ran = []

    class First:
        name = "first"
        order = 1

        def run(self, host):
            ran.append("first")
            stop.set()  # as a signal arriving during this step would
            return WorkerResult()

    class Second:
        name = "second"
        order = 2

        def run(self, host):
            ran.append("second")
            return WorkerResult()

    host = make_host(plugin_with(First(), Second()))
    report = host.tick(stop)
    assert ran == ["first"]
    skipped = {s.name: s.skipped for s in report.steps if s.name in ("first", "second")}
    assert skipped == {"first": False, "second": True}
    (tick,) = collected_events.named("tick.completed")
    assert tick.attributes["skipped"] >= 1


SLOW_PLUGIN = """
    import time
    from hostcore import hookimpl
    from hostcore.plugin.registration import WorkerResult

    def mark(host, name):
        (host.root / "marks").mkdir(exist_ok=True)
        (host.root / "marks" / name).write_text("")

    class Slow:
        name = "slow"
        order = 1

        def run(self, host):
            mark(host, "slow-started")
            time.sleep(1.5)
            mark(host, "slow-finished")
            return WorkerResult()

    class After:
        name = "after"
        order = 2

        def run(self, host):
            mark(host, "after-ran")
            return WorkerResult()

    @hookimpl
    def hostcore_workers(host):
        return [Slow(), After()]
"""


def wait_for(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.02)


@pytest.fixture
def run_loop(tmp_path, fake_site):
    """Start ``hostcore run`` in a subprocess with the slow plugin installed."""
    fake_site.add("fake-slow", {"slow": SLOW_PLUGIN})
    root = tmp_path / "root"
    env = {**os.environ, "PYTHONPATH": str(fake_site.folder),
           "HOSTCORE_LOAD_PLUGINS": "fake-slow"}
    proc = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "run"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc, root / "marks"
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_sigterm_during_a_step_finishes_that_step_then_exits_0(run_loop):
    proc, marks = run_loop
    wait_for(marks / "slow-started")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert (marks / "slow-finished").exists(), "the current step ran to its end"
    assert not (marks / "after-ran").exists(), "no step started after the signal"
    assert "hostcore: stopped" in stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_waiting_stops_at_once(run_loop, signum):
    proc, marks = run_loop
    wait_for(marks / "after-ran")  # the first tick is done; the loop waits 60 s
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - started < 10
    assert "hostcore: stopped" in stderr


SIGNAL_STORM = """
import random, signal, sys, threading
from hostcore.plugin.cli import stop_on_signals

main = threading.main_thread().ident
for _ in range(int(sys.argv[1])):
    stop = stop_on_signals()
    # Aimed at the main thread, so the handler runs while it is inside stop.wait(),
    # holding the event's own lock for part of each call.
    timer = threading.Timer(random.random() / 1000, signal.pthread_kill, (main, signal.SIGTERM))
    timer.start()
    while not stop.wait(0):
        pass
    timer.join()
print("stopped every time;", threading.active_count(), "threads")
"""


def test_a_signal_landing_inside_stop_wait_never_deadlocks_the_loop():
    # Regression: the handler used to call stop.set() itself, which blocks forever
    # on the lock stop.wait() holds when the signal lands inside it; the process
    # then ignored SIGTERM (it hung within a few tries here).
    storm = subprocess.Popen([sys.executable, "-c", SIGNAL_STORM, "150"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = storm.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        storm.kill()
        storm.communicate()
        pytest.fail("a signal delivered inside stop.wait() deadlocked the process")
    assert storm.returncode == 0, stderr
    # One watcher thread serves every call: the main thread and it are all that run.
    assert stdout.strip() == "stopped every time; 2 threads"


def test_the_tick_line_says_rows_in_rows_out_questions_and_what_failed():
    from hostcore.tick import StepReport, TickReport

    report = TickReport(steps=[
        StepReport("ingest", True, counts={"rows": 1_200}),
        StepReport("github-capture", False, error="boom"),
        StepReport("poll", True, counts={"tracked_checks": 2, "ledger_checks": 3}),
        StepReport("file-custody", True, skipped=True),
        StepReport("export", True, pending=True, counts={"rows": 7})], duration_ms=42)
    assert report.summary() == ("tick failed (1 of 4 steps) in 42 ms: rows in 1,200, "
                                "rows out 7, questions 5; work pending")
    quiet = TickReport(steps=[StepReport("ingest", True)], duration_ms=3)
    assert quiet.summary() == "tick ok in 3 ms: nothing changed"


class PartlyDone:
    """A worker that did some work, then failed, saying what it did."""

    name = "partly"

    def run(self, host):
        try:
            raise OSError("no space left on device")
        except OSError as exc:
            raise StepFailed({"rows": 25_000}) from exc


class Failing:
    name = "failing"

    def run(self, host):
        raise ValueError("boom")


def test_a_step_that_failed_after_part_of_its_work_reports_that_work(make_host, caplog):
    host = make_host(plugin_with(PartlyDone(), Failing()))
    with caplog.at_level("WARNING", logger="hostcore.tick"):
        report = host.tick()
    partly, failing = report.failed
    # The failure is the cause's, as if the worker had raised it; the counts are kept.
    assert partly.name == "partly" and partly.error == "OSError: no space left on device"
    assert partly.counts == {"rows": 25_000}
    assert failing.error == "ValueError: boom" and failing.counts == {}
    assert "step 'partly' failed: OSError" in caplog.text
