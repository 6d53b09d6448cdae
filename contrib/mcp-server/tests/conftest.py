"""Fixtures for the hostcore-mcp tests: a served root, real processes, real clients.

* ``fake_github`` — the gh provider's fake GitHub on 127.0.0.1 for the real ``gh``
  (plugins/gh-provider/tests/conftest.py, loaded from there, not copied);
* ``plain_root`` — the evidence and policy of a served root, nothing polled or exported;
* ``served_root`` — a state root with evidence in a full and a local-only directory,
  a ledger filled by ``hostcore poll --once`` through the real ``gh``, and one export
  to the directory destination, so the ref cache holds governance;
* ``facts`` — what the served root holds (rows per directory, the listed issues);
* ``root_env(root)`` — the environment of a ``hostcore`` process on ``root``;
* ``hostcore(root, *args)`` — run another ``hostcore`` process on that root;
* ``mcp_client(root)`` — the MCP Python SDK's client over stdio to ``hostcore mcp``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "gh_provider_test_doubles", REPO / "plugins" / "gh-provider" / "tests" / "conftest.py")
assert _spec is not None and _spec.loader is not None
gh_doubles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gh_doubles)
fake_github = gh_doubles.fake_github

PLUGINS = "hostcore-mcp,hostcore-gh,hostcore-directory-destination"
# Rows per directory of the served root: /srv/full is permitted, /srv/local local-only.
FULL_ROWS = 30
LOCAL_ROWS = 20
LISTING = ("/repos/o/r/issues?state=open&per_page=100&sort=updated&direction=desc"
           "&labels=agent&page=1")
# Odd numbers are issues labelled Bug too, even ones pull requests (GitHub's issues
# listing marks those with a pull_request object).
ISSUES = [{"number": n, "title": f"item {n}", "updated_at": f"2026-11-0{n}T00:00:00Z",
           "labels": [{"name": "agent"}, *([{"name": "Bug"}] if n % 2 else [])],
           **({} if n % 2 else {"pull_request": {"url": f"https://example.test/pulls/{n}"}})}
          for n in range(1, 6)]


def env_for(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **(extra or {}), "HOSTCORE_ROOT": str(root),
            "HOSTCORE_LOAD_PLUGINS": PLUGINS}


def run_hostcore(root: Path, *args: str, extra: dict[str, str] | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "hostcore", *args], env=env_for(root, extra),
                          capture_output=True, text=True, timeout=300, check=False)
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def evidence_rows() -> list[Any]:
    from hostcore.evidence.store import EvidenceRow

    rows = [EvidenceRow(partition="sessions", source_id=("claude", "codex")[i % 2],
                        directory="/srv/full", ts=f"2026-11-0{1 + i % 3}T10:00:00Z",
                        payload={"n": i}, key=f"full-{i}") for i in range(FULL_ROWS)]
    rows += [EvidenceRow(partition="sessions", source_id="claude", directory="/srv/local",
                         ts="2026-11-01T10:00:00Z", payload={"n": i}, key=f"local-{i}")
             for i in range(LOCAL_ROWS)]
    return rows


def make_root(tmp_path: Path, *, outbox: Path | None = None) -> Path:
    """A root with the served evidence and policy, its destination at ``outbox``."""
    from hostcore.evidence.inputs import CLASS_LIST_FILE, ClassList
    from hostcore.host import Host

    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{outbox or tmp_path / "outbox"}"\n'
        '[plugins.gh]\nrepos = ["o/r"]\nlabels = ["agent"]\n')
    with Host(root=root, load_entrypoints=False, env={}) as host:
        host.store.append(evidence_rows())
    ClassList(root / CLASS_LIST_FILE).set("/srv/local", "local-only")
    return root


@pytest.fixture
def plain_root(tmp_path: Path) -> Path:
    """The served evidence and policy, with no ledger and no export yet."""
    return make_root(tmp_path)


@pytest.fixture
def served_root(tmp_path: Path, fake_github: Any) -> Path:
    from hostcore.testing import require_tool

    require_tool("gh", "Debian: apt-get install gh; elsewhere see https://cli.github.com")
    root = make_root(tmp_path)
    fake_github.route(LISTING, 200, ISSUES)
    polled = json.loads(run_hostcore(root, "poll", "--once", "--json",
                                     extra=fake_github.env()).stdout)
    assert [s["listing"] for s in polled] == ["complete"], polled
    run_hostcore(root, "export")
    return root


@pytest.fixture
def facts() -> types.SimpleNamespace:
    """What ``served_root`` holds: rows per directory, the issues GitHub lists."""
    return types.SimpleNamespace(full_rows=FULL_ROWS, local_rows=LOCAL_ROWS, issues=ISSUES)


@pytest.fixture
def root_env() -> Callable[..., dict[str, str]]:
    """``root_env(root)``: the environment a ``hostcore`` process on ``root`` runs with."""
    return env_for


@pytest.fixture
def hostcore() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_hostcore


@contextlib.asynccontextmanager
async def stdio_client(root: Path, *extra_args: str) -> AsyncIterator[Any]:
    """The SDK's client, over stdio, to ``hostcore --root ROOT mcp``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "hostcore", "--root", str(root), "mcp",
                                         *extra_args],
                                   env=env_for(root))
    async with Client(params) as client:
        yield client


@pytest.fixture
def mcp_client() -> Callable[..., contextlib.AbstractAsyncContextManager[Any]]:
    return stdio_client


class HttpServer:
    """``hostcore mcp --http ...`` running in its own process; ``url`` once it listens."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url


def start_http(root: Path, *args: str, extra: dict[str, str] | None = None) -> HttpServer:
    process = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "mcp",
                                "--http", *args], env=env_for(root, extra),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    if "serving " not in line:
        process.kill()
        raise AssertionError(f"hostcore mcp --http did not start: {line}"
                             f"{process.stderr.read()}")
    return HttpServer(process, line.split("serving ", 1)[1].strip())


@pytest.fixture
def http_server() -> Iterator[Callable[..., HttpServer]]:
    started: list[HttpServer] = []

    def start(root: Path, *args: str, extra: dict[str, str] | None = None) -> HttpServer:
        server = start_http(root, *args, extra=extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.process.terminate()
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
