"""What file custody does with an agent's hook events (``hostcore_agent_event``).

* ``SessionStart``: start (or, for the same agent, resume) the agent-owned session
  named by the event's ``session_id``;
* ``PostToolUse``: refresh it, at most once per interval (within it: one read);
* ``SessionEnd``: end its generation with a terminal record.

Every other event returns at once: the hook runs on every tool call. The session id is
the agent's input, so it is untrusted like any record: it becomes the instance name
only when it is one plain name component (letters, digits, ``-``, ``_``; an agent's
UUID is), and is refused as it stands otherwise (:class:`~.errors.CustodyError`),
never cut down or rewritten. A refusal or a held instance raises: ``hostcore hook``
counts it as that plugin's fault and the agent goes on. The registry is the host's
configured one, created on the first start; nothing here logs a session id or a path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore_file_custody.agent_sessions import (
    AgentSessionResult,
    end_agent_session,
    refresh_agent_session,
    start_agent_session,
)
from hostcore_file_custody.events import AGENT_EVENTS_HANDLED
from hostcore_file_custody.registry import START_WAIT_SECONDS, HeartbeatRegistry, check_instance
from hostcore_file_custody.support import AVAILABLE
from hostcore_file_custody.worker import registry_path

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host

# The shortest lock wait worth trying when the hook's budget is nearly spent (seconds).
_MIN_WAIT_SECONDS = 0.05


def handle_agent_event(event: AgentEvent, host: Host) -> AgentSessionResult | None:
    """Start, refresh or end the event's agent-owned session; ``None`` for events
    custody does not handle, and where custody cannot run (Windows)."""
    if event.name not in AGENT_EVENTS_HANDLED or not AVAILABLE:
        return None
    instance = check_instance(event.session_id)
    registry = HeartbeatRegistry(registry_path(host))
    # A held lock is waited on only within what is left of the hook's budget.
    wait = min(START_WAIT_SECONDS, max(_MIN_WAIT_SECONDS, event.budget_seconds))
    if event.name == "SessionStart":
        return start_agent_session(registry, instance, wait_seconds=wait)
    if event.name == "PostToolUse":
        return refresh_agent_session(registry, instance, wait_seconds=wait)
    return end_agent_session(registry, instance, wait_seconds=wait)
