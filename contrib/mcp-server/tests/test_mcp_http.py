"""``hostcore mcp --http``: the SDK's client over streamable HTTP, loopback and tokens.

Each server is a real ``hostcore mcp`` process listening on a port the system
picked; the client is the MCP Python SDK's, and the refusals are checked with
plain HTTP requests too, so a 401 is seen as the network sees it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import anyio
import httpx2
import pytest
from hostcore_mcp.schemas import TOOLS
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

TOKEN = "a-token-of-thirty-two-characters"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "urllib", "version": "0"}}}


def post(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(INITIALIZE).encode(), method="POST",
        headers={"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions an exception group (the client's task group) holds, flattened."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def ask(url: str, token: str | None = None) -> dict[str, Any]:
    """List the tools and call work_items through the SDK client."""
    found: dict[str, Any] = {}

    async def session() -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            found["tools"] = [t.name for t in (await client.list_tools()).tools]
            found["evidence"] = (await client.call_tool("evidence_summary",
                                                        {})).structured_content

    anyio.run(session)
    return found


def test_the_sdk_client_is_served_over_streamable_http_on_loopback(
        plain_root, http_server, facts):
    server = http_server(plain_root, "127.0.0.1:0")
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
    found = ask(server.url)
    assert found["tools"] == list(TOOLS)
    assert found["evidence"]["rows"] == facts.full_rows
    assert server.process.poll() is None


def test_a_token_on_loopback_refuses_every_request_without_it(plain_root, http_server, facts):
    server = http_server(plain_root, "127.0.0.1:0", "--token", TOKEN)
    assert post(server.url) == 401
    assert post(server.url, {"Authorization": "Bearer not-the-token-at-all-no"}) == 401
    assert ask(server.url, TOKEN)["evidence"]["rows"] == facts.full_rows
    with pytest.raises(BaseException) as refused:
        ask(server.url)
    # The SDK's client reports a refused request as an error response (the 401 itself
    # is what post() saw above).
    assert [type(leaf) for leaf in leaves(refused.value)] == [MCPError], refused.value
    assert server.process.poll() is None  # a refused client is no fault of the server


@pytest.mark.parametrize(("args", "says"), [
    (["--http", "0.0.0.0:0"], "not a loopback address"),
    (["--http", "192.0.2.1:0"], "not a loopback address"),
    (["--http", "0.0.0.0:0", "--allow-remote"], "needs a token"),
    (["--http", "127.0.0.1:0", "--token", "short"], "at least 16"),
    (["--http", "127.0.0.1"], "expected HOST:PORT"),
    (["--allow-remote"], "apply to --http only"),
])
def test_an_address_or_token_the_server_would_not_be_safe_with_is_a_usage_error(
        plain_root, hostcore, args, says):
    done = hostcore(plain_root, "mcp", *args, check=False)
    assert done.returncode == 2
    assert says in done.stderr


def test_allow_remote_listens_beyond_loopback_with_the_token_from_the_environment(
        plain_root, http_server, facts):
    server = http_server(plain_root, "0.0.0.0:0", "--allow-remote",
                         extra={"HOSTCORE_MCP_TOKEN": TOKEN})
    port = server.url.rsplit(":", 1)[1].split("/")[0]
    url = f"http://127.0.0.1:{port}/mcp"
    assert post(url) == 401
    assert ask(url, TOKEN)["evidence"]["rows"] == facts.full_rows
