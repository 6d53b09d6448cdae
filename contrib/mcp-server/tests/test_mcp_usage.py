"""The ``usage`` tool answers what ``hostcore usage --json`` prints on the same root.

A root with usage evidence from two sources, in a permitted and a local-only
directory, across a UTC midnight that falls on another day in Europe/Paris, with
a priced and an unpriced model. One session of the SDK's client over stdio asks
with every argument; each answer's structured content equals the command's
JSON for the same arguments, and bad days or zones are refused by name.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import anyio
import pytest
from hostcore_mcp.schemas import UsageCut
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from hostcore.evidence.store import EvidenceRow
from hostcore.evidence.usage import BY
from hostcore.evidence.usage_fields import tokens
from hostcore.host import Host

# (source, directory, session, model, UTC time, tokens): the local-only rows are the
# ones only `exportable` leaves out; 23:30Z on the 1st is the 2nd in Paris.
RESPONSES = [
    ("claude-code", "/srv/full", "s-1", "claude-3-7-sonnet", "2026-11-01T10:00:00Z",
     (100, 200, 300, 400)),
    ("claude-code", "/srv/full", "s-1", "claude-3-7-sonnet", "2026-11-01T23:30:00Z",
     (10, 20, 30, 40)),
    ("codex", "/srv/full", "s-2", "made-up-model", "2026-11-02T08:00:00Z", (1, 2, 3, 4)),
    ("claude-code", "/srv/local", "s-3", "claude-3-7-sonnet", "2026-11-03T12:00:00Z",
     (5000, 6000, 0, 0)),
]
QUESTIONS: list[dict[str, Any]] = [
    {},
    *({"by": by} for by in BY),
    {"by": "day", "tz": "Europe/Paris"},
    {"by": "day", "tz": "UTC", "since": "2026-11-02", "until": "2026-11-02"},
    {"by": "session", "since": "20261101", "until": "2026-11-01", "tz": "Europe/Paris"},
    {"by": "model", "source": "codex"},
    {"by": "project", "exportable": True},
    {"by": "day", "exportable": True, "source": "claude-code", "tz": "Asia/Tokyo"},
]


@pytest.fixture
def usage_root(plain_root):
    with Host(root=plain_root, load_entrypoints=False, env={}) as host:
        host.store.append([
            EvidenceRow(partition="sessions", source_id=source, directory=directory,
                        session_id=session, ts=ts, key=f"usage-{n}",
                        payload={"type": "assistant",
                                 "usage": tokens(model, counts, f"response-{n}")})
            for n, (source, directory, session, model, ts, counts) in enumerate(RESPONSES)])
    return plain_root


def command_line(arguments: dict[str, Any]) -> list[str]:
    args = ["usage", "--json"]
    for name, value in arguments.items():
        args += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return args


def test_the_cuts_are_the_ones_hostcore_usage_knows():
    assert get_args(UsageCut) == BY


def test_usage_answers_what_hostcore_usage_json_prints_for_every_argument(
        usage_root, mcp_client, hostcore):
    got: list[Any] = []

    async def session() -> None:
        async with mcp_client(usage_root) as client:
            for arguments in QUESTIONS:
                got.append(await client.call_tool("usage", arguments))

    anyio.run(session)
    for arguments, answer in zip(QUESTIONS, got, strict=True):
        assert not answer.is_error, (arguments, answer.content)
        printed = json.loads(hostcore(usage_root, *command_line(arguments)).stdout)
        assert answer.structured_content == printed, arguments
        assert json.loads(answer.content[0].text) == printed
    everything = got[0].structured_content
    assert everything["totals"]["input_tokens"] == sum(r[5][0] for r in RESPONSES)
    by_project = {e["key"]: e for e in got[QUESTIONS.index(
        {"by": "project", "exportable": True})].structured_content["entries"]}
    assert list(by_project) == ["/srv/full"]  # the local-only project is withheld
    paris = [e["key"] for e in got[QUESTIONS.index(
        {"by": "day", "tz": "Europe/Paris"})].structured_content["entries"]]
    assert paris == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert got[QUESTIONS.index({"by": "model", "source": "codex"})].structured_content[
        "entries"][0]["cost_usd"] is None  # no price for a made-up model


def test_a_bad_day_or_zone_is_refused_by_name_and_the_session_goes_on(usage_root, mcp_client):
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(usage_root) as client:
            for name, arguments in {"since": {"since": "2026-13-01"},
                                    "until": {"until": "yesterday"},
                                    "tz": {"tz": "Mars/Olympus"}}.items():
                try:
                    got[name] = await client.call_tool("usage", arguments)
                except MCPError as refused:
                    got[name] = refused
            got["by"] = await client.call_tool("usage", {"by": "planet"})
            got["after"] = await client.call_tool("usage", {"by": "model"})

    anyio.run(session)
    for name, quoted in (("since", "'2026-13-01'"), ("until", "'yesterday'"),
                         ("tz", "'Mars/Olympus'")):
        refused = got[name]
        assert isinstance(refused, MCPError) and refused.code == INVALID_PARAMS, refused
        assert refused.message.startswith(f"usage: {name} {quoted}")
    assert got["by"].is_error and "by" in got["by"].content[0].text  # the SDK's refusal
    assert [e["key"] for e in got["after"].structured_content["entries"]] == [
        "claude-3-7-sonnet", "made-up-model"]
