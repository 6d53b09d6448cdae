"""Fixtures for the github-capture tests: evidence, a counting seam, and two fake GitHubs.

* ``capture_plugin(**options)`` — the plugin as a test registers it: the real
  worker, events and commands, with injected budgets, clock or runner.
* ``add_evidence(host, partition, rows)`` — append (directory, source, remote) rows
  through the real store.
* ``CountingSeam`` — wraps the real export seam and counts the rows it yields.
* ``fake_gh`` — a fake ``gh`` first on its own ``PATH``, answering from a world
  file (see ``fake_github_events.py``), one process per call like the real gh.
* ``fake_github`` — the same world served over HTTP on 127.0.0.1 for the real
  ``gh`` binary: gh 2.23 sends ``GH_HOST=github.localhost`` requests to
  ``http://api.github.localhost/`` through ``HTTP_PROXY``, which points here.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.plugin.markers import hookimpl

TESTS_DIR = Path(__file__).parent
_spec = importlib.util.spec_from_file_location(
    "github_capture_fake_events", TESTS_DIR / "fake_github_events.py")
assert _spec is not None and _spec.loader is not None
fake_events = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_events)


class CapturePlugin:
    """The github-capture plugin with injected worker options."""

    __name__ = "github-capture-under-test"

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.worker: Any = None

    @hookimpl
    def hostcore_events(self) -> Any:
        from hostcore_github_capture.events import EVENTS

        return EVENTS

    @hookimpl
    def hostcore_workers(self, host: Any) -> Any:
        from hostcore_github_capture.worker import CaptureWorker

        self.worker = CaptureWorker(host, **self.options)
        return self.worker

    @hookimpl
    def hostcore_commands(self, cli: Any) -> None:
        from hostcore_github_capture.commands import register

        register(cli)


@pytest.fixture
def capture_plugin() -> Any:
    return CapturePlugin


def add_evidence(host: Any, partition: str, rows: Iterable[tuple[str, str, str]]) -> int:
    """Append (directory, source_id, git_remote) rows to ``partition``."""
    return host.store.append([EvidenceRow(partition=partition, source_id=source,
                                          directory=directory, git_remote=remote)
                              for directory, source, remote in rows])


@pytest.fixture
def evidence() -> Any:
    return add_evidence


class CountingSeam:
    """The real seam, counting every row (and tuple) it yields and every read it opens.

    ``windows`` lists each row read's ``(partition, cursor, until)``.
    """

    def __init__(self, seam: Any) -> None:
        self.seam = seam
        self.rows = 0
        self.reads = 0
        self.tuples = 0
        self.windows: list[tuple[Any, int, int | None]] = []

    def read_tuples_since_sync(self, partition: Any, cursor: int, columns: Any, *,
                               until: int | None = None) -> Iterator[Any]:
        self.reads += 1
        for found in self.seam.read_tuples_since_sync(partition, cursor, columns, until=until):
            self.tuples += 1
            yield found

    def export_policy_fingerprint(self) -> str:
        return self.seam.export_policy_fingerprint()

    def tuple_head_sync(self) -> int:
        return self.seam.tuple_head_sync()

    def read_rows_since_sync(self, partition: Any, cursor: int, columns: Any, *,
                             until: int | None = None) -> Iterator[Any]:
        self.reads += 1
        self.windows.append((partition, cursor, until))
        for row in self.seam.read_rows_since_sync(partition, cursor, columns, until=until):
            self.rows += 1
            yield row


@pytest.fixture
def counting_seam() -> Any:
    return CountingSeam


class Clock:
    """A settable clock (seconds since the epoch)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_events(repo: str, count: int, first_id: int = 1) -> list[dict[str, Any]]:
    """``count`` events of ``repo``, newest first, ids ``first_id + count - 1`` down."""
    return [{"id": str(first_id + i), "type": "PushEvent", "repo": {"name": repo},
             "created_at": "2026-09-03T10:00:00Z"}
            for i in reversed(range(count))]


@pytest.fixture(name="make_events")
def make_events_fixture() -> Any:
    return make_events


class World:
    """The fake GitHub's state file and call log, shared by every fake."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        self.data: dict[str, Any] = {"repos": {}, "rate_limit": None}
        self.save()

    def save(self) -> None:
        tmp = self.state_dir / "world.json.tmp"
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.state_dir / "world.json")

    def repo(self, key: str, events: list[dict[str, Any]] | None = None, *,
             poll_interval: int = 60, status: int = 200) -> None:
        self.data["repos"][key] = {"events": events or [], "poll_interval": poll_interval,
                                   "status": status}
        self.save()

    def push(self, key: str, events: list[dict[str, Any]]) -> None:
        """Add newer events on top of ``key``'s list."""
        self.data["repos"][key]["events"][:0] = events
        self.save()

    def rate_limit(self, reset: int | None, retry_after: int | None = None) -> None:
        self.data["rate_limit"] = None if reset is None else {"reset": reset,
                                                             "retry_after": retry_after}
        self.save()

    def unreachable(self, key: str) -> None:
        """Requests for ``key``'s events get no HTTP response (fake gh only)."""
        self.data.setdefault("unreachable", []).append(f"repos/{key}/events")
        self.save()

    def calls(self) -> list[dict[str, Any]]:
        log = self.state_dir / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    def polled_repos(self) -> set[str]:
        return {"/".join(c["path"].split("/")[1:3]) for c in self.calls()}

    def clear_calls(self) -> None:
        (self.state_dir / "calls.jsonl").unlink(missing_ok=True)


class FakeGh(World):
    """A world answered by a fake ``gh`` executable on a PATH of its own."""

    def __init__(self, root: Path) -> None:
        super().__init__(root / "state")
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True)
        script = bin_dir / "gh"
        script.write_text(
            f"#!{sys.executable}\nimport runpy, sys\n"
            f"runpy.run_path({str(TESTS_DIR / 'fake_github_events.py')!r}, "
            "run_name='__main__')\n")
        script.chmod(0o755)
        self.env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                    "FAKE_GH_DIR": str(self.state_dir), "HOME": str(root)}


@pytest.fixture
def fake_gh(tmp_path: Path) -> FakeGh:
    return FakeGh(tmp_path / "fake-gh")


class FakeGitHub(World):
    """A world served over plain HTTP on 127.0.0.1, for the real gh binary."""

    def __init__(self, root: Path) -> None:
        super().__init__(root / "state")
        self.config_dir = root / "gh-config"
        self.config_dir.mkdir()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def env(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.server.server_address[1]}"
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.config_dir),
                "GH_CONFIG_DIR": str(self.config_dir), "GH_HOST": "github.localhost",
                "GH_TOKEN": "test-token-not-real", "HTTP_PROXY": proxy, "http_proxy": proxy,
                "NO_PROXY": "", "no_proxy": ""}

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        world = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = dict(parse_qsl(parts.query))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, reply_headers, body = fake_events.answer(
                    fake_events.load_world(world.state_dir), "GET", parts.path, query, headers)
                fake_events.log_call(world.state_dir, "GET", parts.path, query, headers, status)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    server = FakeGitHub(tmp_path / "fake-github")
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


class Harness:
    """A host with the capture plugin, its sidecar reading through a counting seam."""

    def __init__(self, host: Any, plugin: CapturePlugin, events: Any) -> None:
        self.host = host
        self.worker = plugin.worker
        self.sidecar = self.worker.sidecar
        self.seam = CountingSeam(host.seam)
        self.sidecar.seam = self.seam
        self.events = events

    def add(self, partition: str, rows: Iterable[tuple[str, str, str]]) -> int:
        return add_evidence(self.host, partition, rows)

    def state(self) -> Any:
        return self.sidecar.state.load()

    def inventory(self) -> set[str]:
        return set(self.state().repos)

    def capturing(self) -> set[str]:
        return set(self.sidecar.capture_set()[0])

    def local_only(self, directory: str, local: bool = True) -> None:
        self.host.policy.input("class-list").set(directory, "local-only" if local else "full")

    def opt_out(self, source: str, out: bool = True) -> None:
        self.host.policy.input("sync-opt-out").set(source, out)

    def started(self) -> list[dict[str, Any]]:
        return [e.attributes for e in self.events.named("capture.revalidation_started")]

    def completed(self) -> list[dict[str, Any]]:
        return [e.attributes for e in self.events.named("capture.revalidation_completed")]

    def run_pass(self, limit: int = 1000) -> int:
        """Tick until no pass is under way; returns the ticks taken."""
        for ticks in range(1, limit + 1):
            if not self.sidecar.tick().revalidating:
                return ticks
        raise AssertionError(f"the pass did not complete in {limit} ticks")


@pytest.fixture
def harness(make_host: Any, collected_events: Any, clock: Clock) -> Any:
    """``harness(root=None, **worker_options)``: a fresh host (on ``root`` when given,
    as a restarted process would open it) with the capture plugin."""
    def make(root: Path | None = None, **options: Any) -> Harness:
        options.setdefault("clock", clock)
        plugin = CapturePlugin(**options)
        host = make_host(plugin, root=root)
        return Harness(host, plugin, collected_events)

    return make
