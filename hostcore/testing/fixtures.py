"""The fixtures of hostcore's pytest plugin (see :mod:`hostcore.testing`)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hostcore.plugin.markers import hookimpl


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


class PluginRegistrar:
    """``register_plugin(obj)``: registers ``obj`` for the rest of the test, returns it."""

    def __init__(self) -> None:
        self.plugins: list[object] = []

    def __call__(self, plugin: object) -> object:
        self.plugins.append(plugin)
        return plugin


@pytest.fixture
def register_plugin() -> PluginRegistrar:
    """Register a plugin object for the rest of this test."""
    return PluginRegistrar()


@pytest.fixture
def make_host(
    tmp_path: Path, collected_events: EventCollector, register_plugin: PluginRegistrar
) -> Iterator[Callable[..., Any]]:
    # Loaded with hostcore's pytest plugin in every pytest run: the host loads only when used.
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
def hostcore_cli(tmp_path: Path, register_plugin: PluginRegistrar) -> Callable[..., CliResult]:
    """Run ``hostcore`` in-process with ``--root`` set to a folder of this test."""
    # Loaded with hostcore's pytest plugin in every pytest run: the CLI loads only when used.
    from hostcore.cli.app import run_cli

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


# Set by CI (``.ci/run``): tools that must be there, so a test that needs one
# fails instead of skipping. Comma-separated names, or "all".
ENV_REQUIRED_TOOLS = "HOSTCORE_REQUIRED_TOOLS"


def require_tool(name: str, install: str, *, found: bool | None = None) -> None:
    """Skip the current test, saying how to install ``name``, when the tool is missing.

    ``found`` overrides the ``PATH`` lookup (for a tool found another way, such
    as PostgreSQL's server binaries). Where ``$HOSTCORE_REQUIRED_TOOLS`` names
    the tool (or is ``all``), a missing tool fails the test instead: CI installs
    every tool, so a skip there would hide a test that never ran.
    """
    if found if found is not None else shutil.which(name) is not None:
        return
    message = f"{name} is not installed; install it to run this test ({install})"
    required = {n.strip() for n in os.environ.get(ENV_REQUIRED_TOOLS, "").split(",")}
    if name in required or "all" in required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
