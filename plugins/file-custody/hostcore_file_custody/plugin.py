"""The hostcore plugin: catalogued events, the custody worker, the ``custody`` commands
and agent-owned sessions driven by the agents' hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.interest import agent_interest
from hostcore.plugin.markers import hookimpl
from hostcore_file_custody.agent_events import AGENT_EVENTS_HANDLED, REFRESH_INTERVAL_SECONDS
from hostcore_file_custody.events import EVENTS

if TYPE_CHECKING:
    import click

    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host
    from hostcore.telemetry import EventSpec
    from hostcore_file_custody.worker import CustodyWorker


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> CustodyWorker:
    from hostcore_file_custody.worker import CustodyWorker

    return CustodyWorker(host)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    from hostcore_file_custody.commands import add_commands

    add_commands(cli)


@hookimpl
@agent_interest(*AGENT_EVENTS_HANDLED, every_seconds={"PostToolUse": REFRESH_INTERVAL_SECONDS},
                lean="hostcore_file_custody.agent_hook:handle_lean_event")
def hostcore_agent_event(event: AgentEvent, host: Host) -> None:
    # Loaded on an event custody handles only: the hook runs on every tool call.
    if event.name not in AGENT_EVENTS_HANDLED:
        return
    from hostcore_file_custody.agent_hook import handle_agent_event

    handle_agent_event(event, host)
