"""Each step supervised: under a deadline on a thread of its own, ``sys.exit`` a failed
step, plugin output kept off stdout, and no plugin thread keeping the process alive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostcore import hookimpl, steps
from hostcore.evidence.plugin import INGEST_DEADLINE_SECONDS, IngestWorker
from hostcore.export.plugin import EXPORT_DEADLINE_SECONDS, ExportWorker
from hostcore.files import file_lock
from hostcore.host import STEP_LOCK_FILE
from hostcore.plugin.registration import WorkerResult
from hostcore.steps import STEP_DEADLINE_SECONDS, StepAbandoned, deadline_of
from hostcore.workitems.plugin import POLL_DEADLINE_SECONDS, PollWorker


def plugin_with(*workers: object) -> object:
    class Plugin:
        __name__ = "supervision-test"

        @hookimpl
        def hostcore_workers(self):
            return workers

    return Plugin()


class Marks:
    """Which workers ran, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []


class Blocked:
    """A worker that waits for ``release`` (a hung plugin, until the test lets it go)."""

    order = 1

    def __init__(self, name: str, release: threading.Event, marks: Marks, *,
                 deadline: float | None = None, stop: threading.Event | None = None) -> None:
        self.name = name
        self.release = release
        self.marks = marks
        self.stop = stop
        if deadline is not None:
            self.deadline_seconds = deadline

    def run(self, host):
        self.marks.ran.append(self.name)
        if self.stop is not None:
            self.stop.set()  # as a signal arriving during this step would
        self.release.wait(60)
        self.marks.ran.append(f"{self.name} returned")
        return WorkerResult()


class Plain:
    order = 2

    def __init__(self, name: str, marks: Marks) -> None:
        self.name = name
        self.marks = marks

    def run(self, host):
        self.marks.ran.append(self.name)
        return WorkerResult()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets every blocked worker of the test go at its end, and waits for their threads,
    so no abandoned step outlives its test."""
    event = threading.Event()
    yield event
    event.set()
    for thread in threading.enumerate():
        if thread.name.startswith("hostcore-step-"):
            thread.join(30)


def test_a_step_past_its_deadline_is_abandoned_named_and_the_rest_skipped(
        make_host, release, caplog):
    marks = Marks()
    host = make_host(plugin_with(Blocked("stuck", release, marks, deadline=0.3),
                                 Plain("later", marks)))
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="hostcore.tick"):
        report = host.tick()
    assert time.monotonic() - started < 5
    stuck = next(s for s in report.steps if s.name == "stuck")
    later = next(s for s in report.steps if s.name == "later")
    assert (stuck.ok, stuck.abandoned) == (False, True)
    assert stuck.error == ("StepAbandoned: abandoned, still running past its deadline of "
                           "0.3 s; its code is left running on its thread")
    # It may still hold the step lock: the steps after it would wait on it.
    assert later.skipped and marks.ran == ["stuck"]
    assert report.abandoned == [stuck] and not report.ok
    assert "step 'stuck' abandoned: StepAbandoned" in caplog.text


def test_a_later_tick_refuses_while_the_abandoned_step_runs_and_ticks_once_it_ended(
        make_host, release):
    marks = Marks()
    host = make_host(plugin_with(Blocked("stuck", release, marks, deadline=0.2),
                                 Plain("later", marks)))
    assert host.tick().abandoned
    with pytest.raises(StepAbandoned, match="step 'stuck' was abandoned and still runs"):
        host.tick()
    release.set()
    for thread in threading.enumerate():
        if thread.name == "hostcore-step-stuck":
            thread.join(30)
    assert marks.ran == ["stuck", "stuck returned"]
    report = host.tick()  # the lock went with the thread
    assert report.ok and marks.ran[-1] == "later"


def test_an_abandoned_step_blocks_no_tick_of_another_root(make_host, release):
    marks = Marks()
    hung = make_host(plugin_with(Blocked("stuck", release, marks, deadline=0.2)))
    other = make_host(plugin_with(Plain("elsewhere", marks)))
    assert hung.tick().abandoned
    assert other.tick().ok and marks.ran[-1] == "elsewhere"


def test_the_run_loop_stops_after_a_tick_with_an_abandoned_step(make_host, release):
    marks = Marks()
    host = make_host(plugin_with(Blocked("stuck", release, marks, deadline=0.2)),
                     config={"run": {"interval_seconds": 0.01}})
    report = host.run(threading.Event(), max_ticks=5)
    assert report is not None and [s.name for s in report.abandoned] == ["stuck"]
    assert marks.ran == ["stuck"], "one tick, not five"


def test_a_step_ignoring_a_stop_request_is_abandoned_after_the_grace(
        make_host, release, monkeypatch):
    monkeypatch.setattr(steps, "STOP_GRACE_SECONDS", 0.3)
    marks = Marks()
    stop = threading.Event()
    host = make_host(plugin_with(Blocked("deaf", release, marks, stop=stop)))
    started = time.monotonic()
    report = host.tick(stop)
    assert 0.3 <= time.monotonic() - started < 5
    (deaf,) = [s for s in report.steps if s.name == "deaf"]
    assert deaf.abandoned
    assert deaf.error is not None and "still running 0.3 s after the stop request" in deaf.error


class InterruptedWatch:
    """A stop request whose check raises once the step runs, as Ctrl-C in an
    embedder's main thread does (no signal handler there) while it watches a step."""

    def __init__(self, marks: Marks) -> None:
        self.marks = marks

    def is_set(self) -> bool:
        if self.marks.ran:
            raise KeyboardInterrupt
        return False


def test_an_interrupt_while_watching_a_step_leaves_it_known_as_abandoned(
        make_host, release):
    marks = Marks()
    host = make_host(plugin_with(Blocked("watched", release, marks)))
    host.stop = InterruptedWatch(marks)
    with pytest.raises(KeyboardInterrupt):
        host.tick()
    host.stop = threading.Event()
    # Still running unwatched, maybe holding the lock: the next tick says so.
    with pytest.raises(StepAbandoned, match="step 'watched' was abandoned"):
        host.tick()


def test_a_step_stopped_while_it_waits_for_the_lock_never_runs(make_host, monkeypatch):
    monkeypatch.setattr(steps, "STOP_GRACE_SECONDS", 0.2)
    marks = Marks()
    host = make_host(plugin_with(Plain("waiting", marks)))
    stop = threading.Event()
    with file_lock(host.root / STEP_LOCK_FILE):  # another process's step, say
        threading.Timer(0.2, stop.set).start()
        report = host.tick(stop)
    (waiting,) = [s for s in report.steps if s.name == "waiting"]
    assert (waiting.ok, waiting.skipped, waiting.abandoned) == (True, True, False)
    for thread in threading.enumerate():
        if thread.name == "hostcore-step-waiting":
            thread.join(30)  # it got the lock, and let it go without running
    assert marks.ran == []


class Exits:
    name = "exits"
    order = 1

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def run(self, host):
        raise self.exc


@pytest.mark.parametrize("exc, error", [(SystemExit(0), "SystemExit: 0"),
                                        (KeyboardInterrupt(), "KeyboardInterrupt: ")])
def test_sys_exit_or_keyboard_interrupt_in_a_step_fails_that_step_only(make_host, exc, error):
    marks = Marks()
    host = make_host(plugin_with(Exits(exc), Plain("later", marks)))
    report = host.tick()
    (exits,) = report.failed
    assert exits.name == "exits" and exits.error == error and not exits.abandoned
    assert marks.ran == ["later"]


@pytest.mark.parametrize("declared", [0, -1, "60", True, float("nan")])
def test_a_deadline_that_is_no_positive_number_fails_the_step_saying_so(make_host, declared):
    marks = Marks()
    worker = Plain("odd", marks)
    worker.deadline_seconds = declared  # type: ignore[attr-defined]
    report = make_host(plugin_with(worker)).tick()
    (odd,) = report.failed
    assert odd.error is not None and odd.error.startswith(
        "ValueError: deadline_seconds must be a positive number")
    assert marks.ran == []


def test_each_built_in_worker_has_its_named_deadline_and_others_the_default(make_host):
    host = make_host()
    assert deadline_of(IngestWorker(host)) == INGEST_DEADLINE_SECONDS
    assert deadline_of(ExportWorker(host)) == EXPORT_DEADLINE_SECONDS
    assert deadline_of(PollWorker(host)) == POLL_DEADLINE_SECONDS
    assert deadline_of(Plain("mine", Marks())) == STEP_DEADLINE_SECONDS


# ---------------------------------------------------------------------------------------
# The same through `hostcore run --once`, in a process of its own.

PLUGINS = {
    "slow": """
        import time
        from hostcore import hookimpl

        class Slow:
            name = "slow"
            order = 1
            deadline_seconds = 0.5

            def run(self, host):
                time.sleep(600)

        @hookimpl
        def hostcore_workers(host):
            return Slow()
    """,
    "quitter": """
        import sys
        from hostcore import hookimpl
        from hostcore.plugin.registration import WorkerResult

        class Quitter:
            name = "quitter"
            order = 1

            def run(self, host):
                sys.exit(0)

        class After:
            name = "after-quitter"
            order = 2

            def run(self, host):
                return WorkerResult(counts={"ran": 1})

        @hookimpl
        def hostcore_workers(host):
            return [Quitter(), After()]
    """,
    "chatty": """
        import subprocess, sys, threading
        from hostcore import hookimpl
        from hostcore.plugin.registration import WorkerResult

        class Chatty:
            name = "chatty"

            def run(self, host):
                print("chatty: print from the step")
                sys.stdout.write("chatty: a write to sys.stdout\\n")
                sys.stdout.flush()
                printer = threading.Thread(target=print, args=("chatty: from a thread",))
                printer.start()
                printer.join()
                subprocess.run([sys.executable, "-c", "print('chatty: from a child')"],
                               check=True)
                return WorkerResult(counts={"printed": 4})

        class LoudSink:
            name = "loud-sink"

            def receive(self, event):
                print(f"chatty: the sink got {event.name}")

        @hookimpl
        def hostcore_workers(host):
            return Chatty()

        @hookimpl
        def hostcore_telemetry_sinks(host):
            return LoudSink()
    """,
    "lingering": """
        import threading
        from hostcore import hookimpl
        from hostcore.plugin.registration import WorkerResult

        class Lingering:
            name = "lingering"

            def run(self, host):
                threading.Thread(target=threading.Event().wait, daemon=False,
                                 name="plugin-forever").start()
                return WorkerResult(counts={"threads": 1})

        @hookimpl
        def hostcore_workers(host):
            return Lingering()
    """,
}


@pytest.fixture
def hostcore_with(tmp_path, fake_site):
    """Runs ``hostcore --root ROOT ARGS`` with one of :data:`PLUGINS` installed."""
    for name, source in PLUGINS.items():
        fake_site.add(f"fake-{name}", {name: source})
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    (root / "hostcore.toml").write_text(
        "[run]\nlock_wait_seconds = 0\n"
        f'[plugins.claude-code]\nhome = "{home}"\n[plugins.codex]\nhome = "{home}"\n')

    def run(plugin: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(fake_site.folder),
               "HOSTCORE_LOAD_PLUGINS": f"fake-{plugin}"}
        return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                              env=env, capture_output=True, text=True, timeout=timeout)

    return run


def test_run_once_abandons_a_step_past_its_deadline_and_exits_1_naming_it(hostcore_with):
    started = time.monotonic()
    done = hostcore_with("slow", "run", "--once", "--json")
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 30, "not the step's 600 s"
    assert "stopped with step 'slow' abandoned" in done.stderr
    # The tick's report was written out before the process ended.
    (tick,) = [json.loads(line) for line in done.stdout.splitlines()]
    (slow,) = [s for s in tick["steps"] if s["name"] == "slow"]
    assert slow["abandoned"] and not slow["ok"] and not tick["ok"]
    assert slow["error"].startswith("StepAbandoned: abandoned, still running past its "
                                    "deadline of 0.5 s")
    again = hostcore_with("quitter", "run", "--once")  # the lock was let go
    assert "held by" not in again.stderr


def test_sys_exit_0_in_a_plugin_step_fails_the_run(hostcore_with):
    done = hostcore_with("quitter", "run", "--once", "--json")
    assert done.returncode == 1, done.stderr
    (tick,) = [json.loads(line) for line in done.stdout.splitlines()]
    by_name = {s["name"]: s for s in tick["steps"]}
    assert by_name["quitter"]["error"] == "SystemExit: 0"
    assert by_name["after-quitter"]["ok"] and by_name["after-quitter"]["counts"] == {"ran": 1}


def test_what_a_plugin_step_prints_goes_to_stderr_never_into_the_json(hostcore_with):
    done = hostcore_with("chatty", "run", "--once", "--json")
    assert done.returncode == 0, done.stderr
    ticks = [json.loads(line) for line in done.stdout.splitlines()]
    assert [t["ok"] for t in ticks] == [True]
    # tick.completed reaches the sink on the loop's own thread, between the steps
    # and the tick's JSON line.
    for said in ("print from the step", "a write to sys.stdout", "from a thread",
                 "from a child", "the sink got tick.completed"):
        assert f"chatty: {said}" in done.stderr


def test_a_non_daemon_thread_left_by_a_plugin_does_not_keep_run_once_alive(hostcore_with):
    done = hostcore_with("lingering", "run", "--once", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith("tick ok")


def test_the_cli_page_states_each_deadline_and_the_grace():
    page = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    text = " ".join(page.split())  # the sentences, not their line breaks
    for worker, seconds in (("ingest", INGEST_DEADLINE_SECONDS),
                            ("poll", POLL_DEADLINE_SECONDS),
                            ("export", EXPORT_DEADLINE_SECONDS)):
        assert f"{seconds:g} s for `{worker}`" in text
    assert f"its `deadline_seconds`, else {STEP_DEADLINE_SECONDS:g} s" in text
    assert f"{steps.STOP_GRACE_SECONDS:g} s after SIGINT or SIGTERM" in text
