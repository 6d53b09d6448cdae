"""Each read of a source runs on a watched thread of its own, under the source's
deadline (``deadline_seconds``, else 60 s): a read that hangs is left running and
that source skipped (``hung``) until it returns, one that calls ``sys.exit()``
fails that source alone, and the other sources ingest either way."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.markers import hookimpl


class Rows:
    """Hands out ``n`` rows once; its cursor is how many it has."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def read(self, cursor: str | None) -> SourceBatch:
        start = int(cursor or 0)
        return SourceBatch([EvidenceRow(partition=self.name, source_id=self.name, key=str(i))
                            for i in range(start, self.n)], str(self.n))


class Hanging:
    """Each read waits for ``release``, then gives one row."""

    name = "hanging"
    deadline_seconds = 0.3

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.reads = 0

    def read(self, cursor: str | None) -> SourceBatch:
        self.reads += 1
        self.release.wait()
        return SourceBatch([EvidenceRow(partition=self.name, source_id=self.name, key="late")],
                           "1")


class Exiting:
    name = "exiting"

    def read(self, cursor: str | None) -> SourceBatch:
        raise SystemExit(0)


def plugin(*sources: object) -> object:
    class Plugin:
        @hookimpl
        def hostcore_sources(self, host: object) -> tuple[object, ...]:
            return sources

    return Plugin()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_a_hung_source_is_left_reading_and_the_others_still_ingest(make_host, release,
                                                                   collected_events):
    hanging, good = Hanging(release), Rows("good", 3)
    host = make_host(plugin(hanging, good))
    started = time.monotonic()
    report = host.tick()
    assert time.monotonic() - started < 10, "the tick waited for the hung read"
    (step,) = report.failed
    assert step.name == "ingest" and "'hanging' (hung: StepAbandoned)" in step.error
    assert not step.abandoned, "the step went on: only the source's read was given up on"
    assert host.store.partitions()["good"].row_count == 3
    assert host.store.source_cursor("hanging") is None
    assert [e.attributes["reason"] for e in collected_events.named("evidence.source_failed")
            ] == ["hung"]
    # While that read still runs, the source is not read again (never two at once),
    # and still counts as failed; the others go on.
    good.n = 5
    again = host.tick()
    assert hanging.reads == 1
    assert "'hanging' (hung: StepAbandoned)" in again.failed[0].error
    assert host.store.partitions()["good"].row_count == 5
    assert host.store.source_health()["hanging"].failures == 2
    # Once it returns, it is read again from its cursor (what the late read gave
    # was never stored: its cursor did not move).
    release.set()
    deadline = time.monotonic() + 5
    while hanging.reads == 1 and time.monotonic() < deadline:
        host.tick()
    assert hanging.reads == 2
    assert host.store.partitions()["hanging"].row_count == 1


def test_a_source_that_calls_sys_exit_fails_alone(make_host):
    good = Rows("good", 2)
    host = make_host(plugin(Exiting(), good))
    report = host.tick()
    (step,) = report.failed
    assert "'exiting' (raised: SystemExit)" in step.error
    assert host.store.partitions()["good"].row_count == 2


def test_a_source_deadline_that_is_no_positive_number_fails_that_source(make_host):
    class Odd(Rows):
        deadline_seconds = -1

    host = make_host(plugin(Odd("odd", 1), Rows("good", 1)))
    (step,) = host.tick().failed
    assert "'odd' (raised: ValueError)" in step.error
    assert host.store.partitions()["good"].row_count == 1


HUNG_SOURCE = """
    import threading
    from hostcore import hookimpl

    class Hung:
        name = "hung"
        deadline_seconds = 0.5

        def read(self, cursor):
            threading.Event().wait()  # forever

    @hookimpl
    def hostcore_sources(host):
        return Hung()
"""


def test_run_once_with_a_hung_source_exits_1_naming_it_and_stores_the_others(
        tmp_path, fake_site):
    # A real hostcore process and a real transcript: Claude Code's source still
    # ingests, the hung one is named, and the process exits though its read runs on.
    fake_site.add("fake-hung", {"hung": HUNG_SOURCE})
    projects = tmp_path / "home" / ".claude" / "projects" / "p"
    projects.mkdir(parents=True)
    (projects / "s1.jsonl").write_text(
        '{"type":"user","cwd":"/work/a","sessionId":"s1","uuid":"u1",'
        '"timestamp":"2025-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(fake_site.folder),
           "HOSTCORE_LOAD_PLUGINS": "fake-hung,hostcore-claude-code"}
    root = tmp_path / "root"
    done = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "run",
                           "--once"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "'hung' (hung: StepAbandoned)" in done.stderr
    evidence = subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root),
                               "evidence", "--json"], capture_output=True, text=True,
                              env=env, timeout=60)
    assert evidence.returncode == 0, evidence.stderr
    assert '"claude-code"' in evidence.stdout
