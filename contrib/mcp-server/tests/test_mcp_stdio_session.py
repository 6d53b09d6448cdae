"""One session of the MCP Python SDK's client with ``hostcore mcp`` over stdio.

The root holds evidence in a full and a local-only directory, a ledger filled by
``hostcore poll --once`` through the real ``gh`` against the fake GitHub, and one
export. Within one session: the tools are listed with their schemas; the
evidence counts hold only permitted rows; the work items come with no request
reaching GitHub; and after a policy change and an export made by other
``hostcore`` processes, the next answer, and only that one, names ``context``.
"""

from __future__ import annotations

from typing import Any

import anyio
from hostcore_mcp.schemas import STALENESS_KEY, STATUS_URI, TOOLS


def note(result: Any) -> Any:
    return (result.meta or {}).get(STALENESS_KEY)


def test_one_stdio_session_lists_counts_answers_and_notes_a_policy_change_once(
        served_root, fake_github, hostcore, mcp_client, facts):
    requests_before = len(fake_github.requests)
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(served_root) as client:
            listed = (await client.list_tools()).tools
            seen["tools"] = {t.name: t for t in listed}

            evidence = await client.call_tool("evidence_summary", {})
            seen["evidence"] = evidence
            items = await client.call_tool("work_items", {"repository": "o/r"})
            seen["items"] = items
            seen["requests_after_items"] = len(fake_github.requests)
            seen["quiet"] = [note(await client.call_tool("status", {})),
                             note(await client.call_tool("freshness", {}))]

            # Another process changes the policy, another exports under it.
            hostcore(served_root, "policy", "local-only", "/srv/full", "--force")
            hostcore(served_root, "export")
            seen["after_change"] = await client.call_tool("freshness", {})
            seen["then"] = [note(await client.call_tool(name, {}))
                            for name in ("work_items", "status", "evidence_summary")]
            seen["resource"] = (await client.read_resource(STATUS_URI)).contents[0]

    anyio.run(session)

    tools = seen["tools"]
    assert list(tools) == list(TOOLS)
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.description
    assert set(tools["work_items"].input_schema["properties"]) == {
        "repository", "state", "kind", "label", "limit", "offset"}
    assert {"items", "matched", "listing"} <= set(tools["work_items"].output_schema["required"])
    assert "rows" in tools["evidence_summary"].output_schema["properties"]

    evidence = seen["evidence"]
    assert not evidence.is_error and note(evidence) is None  # a first answer reports nothing
    counted = evidence.structured_content
    assert counted["rows"] == facts.full_rows  # the 20 local-only rows are not counted
    assert counted["by_directory_class"] == {"unclassified": facts.full_rows}
    assert counted["by_source"] == {"claude": facts.full_rows // 2, "codex": facts.full_rows // 2}
    assert sum(counted["by_day"].values()) == facts.full_rows
    assert sum(g["rows"] for g in counted["groups"]) == facts.full_rows

    items = seen["items"].structured_content
    assert seen["requests_after_items"] == requests_before  # nothing reached GitHub
    assert sorted(i["ref"] for i in items["items"]) == [f"o/r#{i['number']}" for i in facts.issues]
    assert items["matched"] == len(facts.issues)
    assert {i["state"] for i in items["items"]} == {"open"}
    assert {i["repository"] for i in items["items"]} == {"o/r"}
    assert items["listing"]["complete"] is True
    assert 0 <= items["listing"]["age_seconds"] < 300

    assert seen["quiet"] == [None, None]  # nothing moved yet
    changed = seen["after_change"]
    assert not changed.is_error
    assert note(changed) == {"moved": ["context"]}
    assert seen["then"] == [None, None, None]  # reported once, then not again
    assert '"components"' in seen["resource"].text
