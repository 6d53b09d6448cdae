"""The ``initialize`` answer, known before the MCP SDK is imported.

Importing the SDK builds the pydantic models of every protocol version it speaks,
which takes a second or more: longer than everything else a connect costs. What
the server answers to ``initialize`` does not depend on any of it: its name,
version, instructions and capabilities are fixed, and the protocol version is
the client's when the SDK negotiates it, else the SDK's latest. So the stdio
transport (:mod:`hostcore_mcp.stdio`) answers from here while the SDK loads,
and checks this answer against the SDK's own for the same request once it has
loaded (a mismatch is logged as a warning: this module has fallen behind the SDK).
"""

from __future__ import annotations

from typing import Any

from hostcore import __version__

INSTRUCTIONS = (
    "hostcore's local state, read-only: `work_items` lists the open work items of every "
    "polled repository from the local ledger (no GitHub call, no rate limit); "
    "`evidence_summary` counts the evidence the withholding policy permits; `status` and "
    "`freshness` say what the host reports and whether governance moved at the "
    "destination; `usage` reports agents' tokens and cost, as `hostcore usage` does. "
    "A result whose _meta holds \"hostcore/staleness\" names the governance "
    "components that moved since this session's previous answer: what was read before "
    "may be out of date."
)
SERVER_NAME = "hostcore"
# The versions the SDK (mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS, mcp 2.3)
# negotiates through initialize, oldest first; a client asking for another one is
# offered the newest. Later eras have no initialize, so the SDK answers them itself.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# What the SDK's MCPServer declares for four tools and one resource, none of which
# changes while it runs.
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}


def initialize_result(params: object) -> dict[str, Any] | None:
    """The result the SDK answers an ``initialize`` with ``params``; ``None`` when the
    params are not a valid request's (the SDK refuses those itself)."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    client = params.get("clientInfo")
    if not (isinstance(requested, str) and isinstance(params.get("capabilities"), dict)
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str)):
        return None
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested if requested in HANDSHAKE_VERSIONS
        else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
