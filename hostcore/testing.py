"""Test helpers for plugin authors, registered as a ``pytest11`` plugin.

Installing hostcore makes these fixtures available in every pytest run:

* ``make_host(*plugins, config=None, load_entrypoints=False)`` builds an isolated
  :class:`~hostcore.host.Host` in a fresh folder under ``tmp_path``; every host it
  made is closed when the test ends.
* ``collected_events`` is a telemetry sink included in every host ``make_host``
  builds; ``collected_events.names()`` lists what was emitted.
* ``register_plugin(obj)`` registers a plugin for the rest of one test: in every
  host ``make_host`` builds and every ``hostcore_cli`` run.
* ``hostcore_cli(*args, env=None)`` runs the CLI in-process against the test's
  root and returns a :class:`CliResult`.

Example::

    def test_my_source_ingests(make_host):
        host = make_host(my_plugin)
        assert host.tick().ok
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The conformance suites (see hostcore.conformance), importable from here for authors.
from hostcore.conformance import (  # noqa: F401
    DestinationConformance,
    PolicyInputConformance,
    ProviderConformance,
    SourceConformance,
    TelemetrySinkConformance,
    WorkerConformance,
)
from hostcore.markers import hookimpl


class EventCollector:
    """A telemetry sink plugin that keeps every event it receives."""

    name = "collected-events"
    __name__ = "hostcore.testing.collected_events"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def receive(self, event: Any) -> None:
        self.events.append(event)

    @hookimpl
    def hostcore_telemetry_sinks(self) -> EventCollector:
        return self

    def names(self) -> list[str]:
        return [e.name for e in self.events]

    def named(self, name: str) -> list[Any]:
        return [e for e in self.events if e.name == name]

    def clear(self) -> None:
        self.events.clear()


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def collected_events() -> EventCollector:
    return EventCollector()


@pytest.fixture
def register_plugin() -> Callable[[object], object]:
    """Register a plugin object for the rest of this test."""
    registered: list[object] = []

    def register(plugin: object) -> object:
        registered.append(plugin)
        return plugin

    register.plugins = registered  # type: ignore[attr-defined]
    return register


@pytest.fixture
def make_host(
    tmp_path: Path, collected_events: EventCollector, register_plugin: Any
) -> Iterator[Callable[..., Any]]:
    from hostcore.host import Host

    hosts: list[Host] = []

    def make(
        *plugins: object,
        config: Mapping[str, Any] | str | Path | None = None,
        load_entrypoints: bool = False,
        root: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Host:
        host_root = root or tmp_path / f"root-{len(hosts)}"
        host = Host(
            root=host_root,
            plugins=[collected_events, *register_plugin.plugins, *plugins],
            load_entrypoints=load_entrypoints,
            config=config,
            env=env if env is not None else {},
        )
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.close()


@pytest.fixture
def hostcore_cli(tmp_path: Path, register_plugin: Any) -> Callable[..., CliResult]:
    """Run ``hostcore`` in-process with ``--root`` set to a folder of this test."""
    from hostcore.cli import run_cli

    def run(*args: str, env: Mapping[str, str] | None = None, root: Path | None = None,
            entrypoints_env: bool = False) -> CliResult:
        full_env = dict(env or {})
        if not entrypoints_env:
            full_env.setdefault("HOSTCORE_LOAD_PLUGINS", "")
        out, err = io.StringIO(), io.StringIO()
        argv = ["--root", str(root or tmp_path / "cli-root"), *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_cli(argv, extra_plugins=register_plugin.plugins, env=full_env)
        return CliResult(code, out.getvalue(), err.getvalue())

    return run
