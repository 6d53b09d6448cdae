"""What goes wrong around ``hostcore mcp`` is a protocol error naming it, never a crash.

Unknown tools and arguments, a root that does not exist and a store replaced
under the running server: each is met by the real server process, and the
session goes on. A client that leaves in the middle of a call is
test_mcp_disconnect.py's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from hostcore.evidence.store import STORE_FILE_NAME, EvidenceRow
from hostcore.host import Host


def outcome(coroutine: Any) -> Any:
    """A call's answer, or the MCPError it was refused with."""
    async def run() -> Any:
        try:
            return await coroutine
        except MCPError as refused:
            return refused

    return run()


def test_unknown_tools_and_arguments_are_refused_by_name_and_the_session_goes_on(
        plain_root, mcp_client, facts):
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(plain_root) as client:
            got["argument"] = await outcome(client.call_tool("work_items", {"repo": "o/r"}))
            got["tool"] = await outcome(client.call_tool("issues", {}))
            got["value"] = await outcome(client.call_tool("work_items", {"limit": 0}))
            got["after"] = await client.call_tool("evidence_summary", {})

    anyio.run(session)
    argument = got["argument"]
    assert isinstance(argument, MCPError) and argument.code == INVALID_PARAMS
    assert argument.message == ("work_items: unknown argument(s) 'repo'; work_items takes "
                                "kind, label, limit, offset, repository, state")
    tool = got["tool"]
    assert isinstance(tool, MCPError) and tool.code == INVALID_PARAMS
    assert "unknown tool 'issues'" in tool.message and "work_items" in tool.message
    value = got["value"]  # a known argument with a bad value: the SDK's own refusal
    assert value.is_error and "limit" in value.content[0].text
    assert got["after"].structured_content["rows"] == facts.full_rows


def test_a_root_that_does_not_exist_is_named_on_every_call_until_it_does(
        tmp_path, mcp_client, hostcore):
    root = tmp_path / "not-yet"
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(root) as client:
            got["tool"] = await outcome(client.call_tool("work_items", {}))
            got["resource"] = await outcome(client.read_resource("hostcore://status"))
            root.mkdir(mode=0o700)
            got["then"] = await client.call_tool("work_items", {})

    anyio.run(session)
    for refused in (got["tool"], got["resource"]):
        assert isinstance(refused, MCPError) and refused.code == INTERNAL_ERROR
        assert f"state root {root} does not exist" in refused.message
    assert not got["then"].is_error and got["then"].structured_content["matched"] == 0
    assert not (root / STORE_FILE_NAME).exists()  # read-only: the server made nothing


def replace_store(root: Path, content: Path | bytes) -> None:
    """Put another file in the store's place, as a restore from backup does."""
    for suffix in ("-wal", "-shm"):
        Path(f"{root / STORE_FILE_NAME}{suffix}").unlink(missing_ok=True)
    staged = root / "store.staged"
    if isinstance(content, bytes):
        staged.write_bytes(content)
    else:
        staged.write_bytes(content.read_bytes())
    os.replace(staged, root / STORE_FILE_NAME)


def test_a_store_replaced_under_the_server_is_named_when_broken_and_read_when_good(
        plain_root, tmp_path, mcp_client, facts):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    with Host(root=other, load_entrypoints=False, env={}) as host:
        host.store.append([EvidenceRow(partition="sessions", source_id="codex",
                                       directory="/elsewhere", ts="2026-11-09T00:00:00Z",
                                       key=f"k{i}") for i in range(7)])
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(plain_root) as client:
            got["before"] = await client.call_tool("evidence_summary", {})
            replace_store(plain_root, b"this is no database, it is a note\n" * 100)
            got["broken"] = await outcome(client.call_tool("evidence_summary", {}))
            got["status"] = await outcome(client.call_tool("status", {}))
            replace_store(plain_root, other / STORE_FILE_NAME)
            got["restored"] = await client.call_tool("evidence_summary", {})

    anyio.run(session)
    assert got["before"].structured_content["rows"] == facts.full_rows
    broken = got["broken"]
    assert isinstance(broken, MCPError) and broken.code == INTERNAL_ERROR
    assert broken.message.startswith("evidence_summary: ")
    assert str(plain_root / STORE_FILE_NAME) in broken.message
    # status reports each component on its own: the ones reading the store say why.
    status = got["status"]
    assert not status.is_error
    assert f"{STORE_FILE_NAME}" in json.dumps(status.structured_content["components"])
    restored = got["restored"].structured_content
    assert restored["rows"] == 7 and restored["by_source"] == {"codex": 7}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_server_answers_while_a_step_holds_the_lock_and_writes_nothing(
        plain_root, mcp_client, facts):
    before = snapshot(plain_root)
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(plain_root) as client:
            for name in ("status", "work_items", "evidence_summary", "freshness"):
                got[name] = await client.call_tool(name, {})

    writer = Host(root=plain_root, load_entrypoints=False, env={})
    try:
        with writer.step_lock(timeout=0):  # a tick's step, as long as the session lasts
            anyio.run(session)
    finally:
        writer.close()
    assert [r.is_error for r in got.values()] == [False] * 4
    assert got["evidence_summary"].structured_content["rows"] == facts.full_rows
    after = snapshot(plain_root)
    after.pop("run.lock", None)  # the test's own step made it
    # SQLite's WAL index beside the store: any reader of a WAL database makes these
    # (hostcore status does too); the store itself is untouched.
    for name in (f"{STORE_FILE_NAME}-wal", f"{STORE_FILE_NAME}-shm"):
        after.pop(name, None)
        before.pop(name, None)
    assert after == before
