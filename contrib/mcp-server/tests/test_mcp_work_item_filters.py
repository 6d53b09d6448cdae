"""``work_items`` filtered by kind and label, over a ledger ``hostcore poll`` filled.

The real ``gh`` listed the fake GitHub's issues once (odd numbers issues labelled
``Bug``, even ones pull requests); within one session of the SDK's client over
stdio, every filter combines with the repository and the state, and no request
reaches GitHub while the session asks.
"""

from __future__ import annotations

from typing import Any

import anyio

QUESTIONS: dict[str, dict[str, Any]] = {
    "pulls": {"kind": "pull_request"},
    "issues": {"kind": "issue", "repository": "o/r"},
    "bug_any_case": {"label": "bug"},
    "bug_issues_here": {"label": "BUG", "kind": "issue", "repository": "o/r", "state": "open"},
    "bug_pulls": {"label": "Bug", "kind": "pull_request"},
    "agent": {"label": "agent", "state": "any"},
    "other_repository": {"label": "agent", "repository": "o/other"},
    "ended_pulls": {"kind": "pull_request", "state": "ended"},
    "a_label_nobody_has": {"label": "ag"},
    "unknown_kind": {"kind": "unknown"},
}


def refs(answer: Any) -> list[str]:
    return sorted(item["ref"] for item in answer.structured_content["items"])


def test_work_items_filter_by_kind_and_label_with_repository_and_state_asking_github_nothing(
        served_root, fake_github, mcp_client):
    requests_before = len(fake_github.requests)
    got: dict[str, Any] = {}

    async def session() -> None:
        async with mcp_client(served_root) as client:
            for name, arguments in QUESTIONS.items():
                got[name] = await client.call_tool("work_items", arguments)
            got["all"] = await client.call_tool("work_items", {})

    anyio.run(session)
    assert len(fake_github.requests) == requests_before  # nothing reached GitHub
    assert not any(answer.is_error for answer in got.values())
    assert refs(got["pulls"]) == ["o/r#2", "o/r#4"]
    assert refs(got["issues"]) == ["o/r#1", "o/r#3", "o/r#5"]
    # GitHub's label names have no case: a filter in any case finds them.
    assert refs(got["bug_any_case"]) == refs(got["bug_issues_here"]) == refs(got["issues"])
    assert refs(got["bug_pulls"]) == []
    assert refs(got["agent"]) == [f"o/r#{n}" for n in range(1, 6)]
    assert got["agent"].structured_content["matched"] == 5
    assert refs(got["other_repository"]) == refs(got["ended_pulls"]) == []
    assert refs(got["a_label_nobody_has"]) == []  # a label is matched whole, not as a prefix
    assert refs(got["unknown_kind"]) == []  # every record was written with its kind
    shown = {item["ref"]: (item["kind"], item["labels"])
             for item in got["all"].structured_content["items"]}
    assert shown == {
        "o/r#1": ("issue", ["agent", "Bug"]), "o/r#2": ("pull_request", ["agent"]),
        "o/r#3": ("issue", ["agent", "Bug"]), "o/r#4": ("pull_request", ["agent"]),
        "o/r#5": ("issue", ["agent", "Bug"])}
