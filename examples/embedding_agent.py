"""An agent that embeds hostcore in its own process.

Run it::

    python examples/embedding_agent.py [ROOT]

It builds a :class:`hostcore.Host` with no entry-point plugins at all: everything
is registered in-process. The agent brings

* its **own telemetry sink**, counting the events the host emits;
* a **work-item event handler**, told when a task opens or closes;
* a tiny **provider** over the agent's own task list;
* a **withholding-policy input** holding the directories the agent keeps private;

and uses hostcore's directory destination to export, and the host's **freshness
tracker** (``host.freshness``) to learn, between two steps of a task, that the
governance it read has moved: the decisions (a task ended) and then the context
(its own withholding policy changed). Each change is reported once.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import msgspec

from hostcore import Host, hookimpl
from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)


class CountingSink:
    """The agent's telemetry sink: counts per event name, nothing else kept."""

    name = "agent-telemetry"

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def receive(self, event) -> None:
        self.counts[event.name] = self.counts.get(event.name, 0) + 1


class AgentTasks:
    """A provider over the agent's in-memory task list: ``agent:<id>`` refs."""

    name = "agent-tasks"

    def __init__(self) -> None:
        self.states: dict[str, str] = {}

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("agent:")

    def scope_of(self, ref: WorkItemRef) -> str:
        return "agent"

    def list_items(self) -> Listing:
        items = tuple(WorkItem(ref=WorkItemRef(ref)) for ref, state in sorted(self.states.items())
                      if state == "open")
        return Listing((ScopeListing(scope="agent", status="complete", items=items),))

    def closure(self, ref: WorkItemRef) -> Closure:
        if ref.ref not in self.states:
            raise ProviderError(f"{ref.ref}: the agent never had this task", ref=ref.ref)
        return Closure(state="open" if self.states[ref.ref] == "open" else "closed")


class PrivateDirectories:
    """Withholds evidence recorded in the directories the agent marks private."""

    name = "agent-private"

    def __init__(self) -> None:
        self.directories: set[str] = set()

    def withholds(self, directory: str, source_id: str) -> bool:
        return directory in self.directories

    def fingerprint_part(self) -> str:
        text = "\n".join(sorted(self.directories))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class Agent:
    """The agent's plugin object: pluggy calls these hooks on this instance."""

    __name__ = "embedding-agent"

    def __init__(self) -> None:
        self.sink = CountingSink()
        self.tasks = AgentTasks()
        self.private = PrivateDirectories()
        self.seen: list[tuple[str, str]] = []

    @hookimpl
    def hostcore_telemetry_sinks(self, host):
        return self.sink

    @hookimpl
    def hostcore_providers(self, host):
        return self.tasks

    @hookimpl
    def hostcore_policy_inputs(self, host):
        return self.private

    @hookimpl
    def hostcore_work_item_event(self, event, host):
        self.seen.append((event.kind, event.ref.ref))


def build_host(root: Path, agent: Agent) -> Host:
    import hostcore_directory_destination.plugin as directory_destination

    config = {
        # Poll on every tick: this demo's ticks are moments apart.
        "poll": {"interval_seconds": 0.001},
        "plugins": {"directory-destination": {"path": "outbox"}},
    }
    return Host(root=root, plugins=[agent, directory_destination], load_entrypoints=False,
                config=config, env={})


def main(root: Path) -> dict[str, object]:
    """Run the agent's story against ``root``; returns what it observed."""
    agent = Agent()
    moved: list[list[str]] = []
    with build_host(root, agent) as host:
        agent.tasks.states["agent:1"] = "open"
        host.tick()  # the poller lists agent:1: an "opened" event; the export runs
        moved.append(host.freshness.check())  # first check: the baseline

        # The agent takes the task on: a session section makes the record tracked,
        # so the poller asks about it every cycle it is missing from the listing
        # (a poll-only record would wait for the ledger-only window instead).
        host.ledger.update("agent:1", lambda record: msgspec.structs.replace(
            record, session={"agent": "embedding-agent", "state": "working"}))
        agent.tasks.states["agent:1"] = "closed"
        host.tick()  # agent:1 left the listing; the poller asks, hears "closed", and
        # stamps the ledger record ended: decisions, so the decisions identity moves
        moved.append(host.freshness.check())

        agent.private.directories.add("/home/someone/clients/acme")
        host.tick()  # the export carries the new policy fingerprint to the destination
        moved.append(host.freshness.check())  # the agent learns its policy view moved
        moved.append(host.freshness.check())  # ... once
        report = host.status()
    return {"work_item_events": agent.seen, "freshness": moved,
            "telemetry": dict(agent.sink.counts), "status": report}


if __name__ == "__main__":
    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="agent-"))
    outcome = main(state)
    print(f"state root: {state}")
    for kind, ref in outcome["work_item_events"]:
        print(f"work item {ref}: {kind}")
    for number, components in enumerate(outcome["freshness"], start=1):
        print(f"freshness check {number}: {', '.join(components) or 'nothing moved'}")
    print("events seen:", ", ".join(f"{k}={v}" for k, v in sorted(outcome["telemetry"].items())))
