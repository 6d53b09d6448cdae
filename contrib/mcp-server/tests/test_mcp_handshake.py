"""``initialize`` over stdio is answered before the MCP SDK loads, as the SDK would.

The server's answer comes from :mod:`hostcore_mcp.handshake`; once the SDK has
loaded it answers the same request itself, the transport compares the two and
logs a warning when they differ. Each protocol version a client may ask for is
put to a real server process: one answer per request, the version the SDK
negotiates, and no such warning. A request the SDK would refuse is left to it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from hostcore_mcp.handshake import HANDSHAKE_VERSIONS
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_MODERN_VERSION

from hostcore import __version__

MISMATCH = "answered initialize otherwise"


def initialize(version: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "handshake", "version": "0"}, **params}}


def session(root, env, *messages: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A server's answers to ``messages`` and then tools/list (answered once the SDK
    has taken over, so after it compared its own initialize answer), and its stderr.
    Input ends only once tools/list is answered: the SDK drops what is unanswered
    at the end of input."""
    process = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "mcp"],
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    for message in (*messages, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}):
        process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()
    got: list[dict[str, Any]] = []
    while not got or got[-1].get("id") != 8:
        line = process.stdout.readline()
        assert line, "the server ended before answering tools/list"
        got.append(json.loads(line))
    process.stdin.close()
    process.stdin = None  # closed: communicate() has nothing more to send
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return got + [json.loads(line) for line in out.splitlines()], err


def test_the_handshake_knows_the_versions_the_sdk_negotiates():
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_every_version_a_client_asks_for_is_answered_once_as_the_sdk_answers_it(
        plain_root, root_env):
    asked = {version: version for version in HANDSHAKE_VERSIONS}
    # A version the handshake does not know, and one of the era without initialize,
    # are both offered the newest handshake version.
    asked.update({"1999-01-01": HANDSHAKE_VERSIONS[-1],
                  LATEST_MODERN_VERSION: HANDSHAKE_VERSIONS[-1]})
    for version in asked:
        got, err = session(plain_root, root_env(plain_root), initialize(version))
        assert [a["id"] for a in got] == [7, 8], got  # one answer each, in order
        result = got[0]["result"]
        assert result["protocolVersion"] == asked[version]
        assert result["serverInfo"] == {"name": "hostcore", "version": __version__}
        assert "tools" in result["capabilities"]
        assert [t["name"] for t in got[1]["result"]["tools"]][:2] == ["status", "work_items"]
        assert MISMATCH not in err and "Traceback" not in err, err


def test_an_initialize_the_sdk_would_refuse_is_left_to_it(plain_root, root_env):
    bad = initialize("2025-11-25")
    del bad["params"]["clientInfo"]
    got, err = session(plain_root, root_env(plain_root), bad)
    refused = [a for a in got if a.get("id") == 7]
    assert len(refused) == 1 and "error" in refused[0], got
    assert refused[0]["error"]["code"] == INVALID_PARAMS  # the SDK's own refusal
    assert MISMATCH not in err and "Traceback" not in err, err
