"""The MCP server: four read-only tools and one resource over a state root.

Each tool answers with structured content (checked by the SDK against the
tool's output schema) and the same JSON as text, for clients that read only
text. A tool's answer carries ``_meta["hostcore/staleness"] = {"moved": [...]}``
when, and only when, it is the session's first answer since the governance of
the export stream moved (seed 004: "reported once, to the answer that first
spans it").

What goes wrong is a protocol error naming the problem, never a crash of the
server: an unknown tool or argument (``-32602``, naming the ones it knows), a
root that is not there, a store that cannot be read (``-32603``, naming the
file and why). The SDK logs at WARNING and above only: its INFO lines quote
arguments and messages, which may name repositories.
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import msgspec
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import Field

from hostcore import __version__
from hostcore.errors import HostcoreError
from hostcore.host import Host
from hostcore_mcp import answers
from hostcore_mcp.handshake import INSTRUCTIONS, SERVER_NAME
from hostcore_mcp.schemas import (
    STALENESS_KEY,
    STATUS_URI,
    EvidenceAnswer,
    FreshnessAnswer,
    StatusAnswer,
    UsageAnswer,
    UsageCut,
    WorkItemKind,
    WorkItemsAnswer,
    WorkItemState,
)
from hostcore_mcp.session import SESSION_HEADER, ServedRoot, Staleness

# Failures of local state an answer can meet: each is reported to the caller by name.
_STATE_ERRORS = (HostcoreError, sqlite3.DatabaseError, OSError, msgspec.DecodeError)

_encode = msgspec.json.Encoder(order="sorted")


def build_server(served: ServedRoot) -> MCPServer[Any]:
    """The server answering about ``served``'s root."""
    known = KnownArguments()
    server: MCPServer[Any] = MCPServer(
        name=SERVER_NAME, version=__version__, instructions=INSTRUCTIONS,
        log_level="WARNING", middleware=[known])
    notes = Staleness(served.root)

    def answer(ctx: Context, tool: str, compute: Callable[[Host], Any]) -> CallToolResult:
        value = _computed(served, tool, compute)
        # After the answer, not before: a call that failed has told the caller nothing,
        # so the note waits for the next answer that succeeds.
        moved = notes.moved(_session_of(ctx))
        return CallToolResult(content=[TextContent(type="text", text=_encode.encode(value)
                                                    .decode())],
                              structured_content=value,
                              _meta={STALENESS_KEY: {"moved": moved}} if moved else None)

    def status(ctx: Context) -> Annotated[CallToolResult, StatusAnswer]:
        """What `hostcore status --json` reports: each component's counts and
        availability, and the last tick this root ran, with its age."""
        return answer(ctx, "status", answers.status)

    def work_items(
        ctx: Context,
        repository: Annotated[str | None, Field(
            description="Only this repository (owner/name, as the ref spells it).")] = None,
        state: Annotated[WorkItemState, Field(
            description="open (default), ended (closed, merged or moved, not yet "
                        "archived) or any.")] = "open",
        kind: Annotated[WorkItemKind | None, Field(
            description="Only issues or only pull requests (unknown: records polled "
                        "before the ledger kept kinds).")] = None,
        label: Annotated[str | None, Field(
            min_length=1, description="Only items carrying this label (any case).")] = None,
        limit: Annotated[int, Field(ge=1, le=answers.MAX_ITEMS,
                                    description="Items per answer.")] = 100,
        offset: Annotated[int, Field(ge=0, description="Items to skip (paging).")] = 0,
    ) -> Annotated[CallToolResult, WorkItemsAnswer]:
        """The work items of the local ledger, by repository then last listing, with
        how many match and how old the last poll's listing is. Answered from local
        state alone: no provider is asked."""
        return answer(ctx, "work_items", lambda host: answers.work_items(
            host, repository=repository, state=state, kind=kind, label=label, limit=limit,
            offset=offset))

    def evidence_summary(
        ctx: Context,
        partition: Annotated[str | None, Field(
            description="Only this partition of the store (default: all).")] = None,
    ) -> Annotated[CallToolResult, EvidenceAnswer]:
        """Counts of the evidence rows the withholding policy permits, by source,
        directory class and day. Every row is counted through the export seam, so a
        withheld row is never counted."""
        return answer(ctx, "evidence_summary",
                      lambda host: answers.evidence_summary(host, partition=partition))

    def freshness(ctx: Context) -> Annotated[CallToolResult, FreshnessAnswer]:
        """This host's ref against its export destination's, component by component
        (content: behind/ahead; context, terms, decisions: current/moved/unknown)."""
        return answer(ctx, "freshness", answers.freshness)

    def usage(
        ctx: Context,
        by: Annotated[UsageCut, Field(description="What each entry is.")] = "day",
        since: Annotated[str | None, Field(
            description="From this day (YYYY-MM-DD, in tz).")] = None,
        until: Annotated[str | None, Field(description="To this day, included.")] = None,
        source: Annotated[str | None, Field(
            description="Only usage of this source id (claude-code, codex...).")] = None,
        tz: Annotated[str | None, Field(
            description="The IANA zone days are cut in (default: the server's local "
                        "zone).")] = None,
        exportable: Annotated[bool, Field(
            description="Only usage the withholding policy lets leave this "
                        "machine.")] = False,
    ) -> Annotated[CallToolResult, UsageAnswer]:
        """Tokens and cost of agents' sessions per day, session, project, model or
        machine: what `hostcore usage --json` reports (counts only, no prompt or
        answer; cost from hostcore's dated price table)."""
        try:
            window = answers.usage_window(since, until, tz)
        except ValueError as exc:
            raise MCPError(INVALID_PARAMS, f"usage: {exc}") from None
        return answer(ctx, "usage", lambda host: answers.usage(
            host, by=by, window=window, source=source, exportable=exportable))

    for tool, title in ((status, "hostcore status"), (work_items, "Open work items"),
                        (evidence_summary, "Evidence counts"),
                        (freshness, "Freshness against the destination"),
                        (usage, "Token usage and cost")):
        # The docstring is the description agents read: without its source indentation.
        server.add_tool(tool, name=tool.__name__, title=title,
                        description=inspect.cleandoc(tool.__doc__ or ""))
        known.tools[tool.__name__] = _arguments(tool)

    @server.resource(STATUS_URI, name="status", mime_type="application/json",
                     description="What `hostcore status --json` reports (the status tool).")
    def status_resource() -> str:
        return _encode.encode(_computed(served, STATUS_URI, answers.status)).decode()

    return server


def _computed(served: ServedRoot, what: str, compute: Callable[[Host], Any]) -> Any:
    try:
        with served.host() as host:
            return compute(host)
    except _STATE_ERRORS as exc:
        raise MCPError(INTERNAL_ERROR, f"{what}: {exc}") from None


def _session_of(ctx: Context) -> str:
    headers = ctx.headers
    return (headers or {}).get(SESSION_HEADER, "")


def _arguments(tool: Callable[..., Any]) -> frozenset[str]:
    """The argument names a tool function declares (its context is the SDK's, not the caller's)."""
    return frozenset(name for name in inspect.signature(tool).parameters if name != "ctx")


class KnownArguments:
    """Refuses a ``tools/call`` naming an unknown tool or argument, as a protocol error.

    The SDK's argument models ignore names they do not declare, so a misspelt
    filter (``repo`` for ``repository``) would answer about everything instead
    of what was asked. This middleware runs before the SDK looks at a call.
    """

    def __init__(self) -> None:
        self.tools: dict[str, frozenset[str]] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            self.check(ctx.params)
        return await call_next(ctx)

    def check(self, params: Mapping[str, Any]) -> None:
        name = params.get("name")
        known = self.tools.get(name) if isinstance(name, str) else None
        if known is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}; the tools are "
                           f"{', '.join(self.tools)}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise MCPError(INVALID_PARAMS, f"{name}: arguments must be an object")
        unknown = sorted(set(arguments) - known)
        if unknown:
            takes = ", ".join(sorted(known)) or "no arguments"
            raise MCPError(INVALID_PARAMS, f"{name}: unknown argument(s) "
                           f"{', '.join(map(repr, unknown))}; {name} takes {takes}")
