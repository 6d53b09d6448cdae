"""The shapes of the tools' structured answers, as the MCP SDK publishes them.

The SDK derives each tool's ``outputSchema`` from its return annotation and
checks every answer against it; TypedDicts are what it reads without this
package defining pydantic models of its own. Every field is a count, a state,
a time or a name the caller asked about: none carries a path or a title the
caller did not already hold.
"""

from __future__ import annotations

from typing import Any, Literal

# typing_extensions, not typing: pydantic reads only its TypedDict on Python 3.11.
from typing_extensions import TypedDict

# The tool names, in the order tools/list lists them.
TOOLS: tuple[str, ...] = ("status", "work_items", "evidence_summary", "freshness", "usage")
# The _meta key of the staleness note (docs/mcp.md).
STALENESS_KEY = "hostcore/staleness"
# The resource the status answer is also offered as.
STATUS_URI = "hostcore://status"

WorkItemState = Literal["open", "ended", "any"]
# unknown: a record the poller wrote before it kept an item's kind.
WorkItemKind = Literal["issue", "pull_request", "unknown"]
# What a usage report is cut by: hostcore.evidence.usage.BY, as a type the SDK publishes.
UsageCut = Literal["day", "session", "project", "model", "machine"]


class StatusAnswer(TypedDict):
    """``hostcore status --json``, as it reports."""

    root: str
    components: dict[str, Any]
    last_tick: dict[str, Any] | None
    telemetry: dict[str, Any]


class WorkItemEntry(TypedDict):
    """One item as the ledger's index summarises it."""

    ref: str
    repository: str
    state: Literal["open", "ended"]
    kind: WorkItemKind
    # As the last listing written said; [] for a record written before labels were kept.
    labels: list[str]
    # tracked: another component holds a section of it; ledger_only: only the poller knows it.
    tracking: str
    last_listed_at: str
    updated_at: str


class ListingAge(TypedDict):
    """The last poll cycle on record: when it ran and what it could list."""

    # Seconds since the last cycle kept its report; None when no cycle ever did.
    age_seconds: int | None
    # True when every provider listed every scope it covers in that cycle.
    complete: bool
    providers: dict[str, str]


class WorkItemsAnswer(TypedDict):
    items: list[WorkItemEntry]
    # Items matching the filters, of which ``items`` is the page from ``offset``;
    # counted up to answers.MATCH_COUNT_LIMIT, when matched_capped says there are more.
    matched: int
    matched_capped: bool
    offset: int
    listing: ListingAge


class EvidenceGroup(TypedDict):
    source: str
    # full, local-only (never counted: withheld) or unclassified (no entry covers it).
    directory_class: str
    # The row's UTC day (YYYY-MM-DD), or "unknown" for a time that does not parse.
    day: str
    rows: int


class EvidenceAnswer(TypedDict):
    # The rows the withholding policy permits, all of them counted through the export seam.
    rows: int
    by_source: dict[str, int]
    by_directory_class: dict[str, int]
    by_day: dict[str, int]
    groups: list[EvidenceGroup]


class ComponentState(TypedDict):
    component: str
    status: str
    local: int | str
    remote: int | str


class FreshnessAnswer(TypedDict):
    available: bool
    # Why there is no comparison (no destination configured, say); None when there is one.
    reason: str | None
    destination: str | None
    stream: str
    position: int
    rows_behind: int
    rows_behind_capped: bool
    # What this host last agreed with the destination against what it publishes now.
    governance: list[ComponentState]
    moved_at_destination: list[str]
    # This host's ref against the one last agreed.
    since_last_push: list[ComponentState]
    moved_since_last_push: list[str]
    conflicts: list[str]


class UsageTokens(TypedDict):
    """Tokens of each kind and their cost (None: no price known for any model in it)."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: float | None


class UsageEntry(UsageTokens):
    # A day (YYYY-MM-DD), a session id, a project folder, a model or a machine name.
    key: str
    models: dict[str, UsageTokens]


class UsageAnswer(TypedDict):
    """``hostcore usage --json``, as it reports."""

    by: UsageCut
    entries: list[UsageEntry]
    totals: UsageTokens
