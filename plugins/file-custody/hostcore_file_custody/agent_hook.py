"""What file custody does with an agent's hook events (``hostcore_agent_event``).

* ``SessionStart``: start (or, for the same agent, resume) the agent-owned session
  named by the event's ``session_id``;
* ``PostToolUse``: refresh it, at most once per interval (within it: one read);
* ``SessionEnd``: end its generation with a terminal record.

Every other event returns at once: the hook runs on every tool call. The session id is
the agent's input, so it is untrusted like any record: it becomes the instance name
only when it is one plain name component (letters, digits, ``-``, ``_``; an agent's
UUID is), and is refused as it stands otherwise, never cut down or rewritten. A
refusal, a held instance or an OS error raises :class:`~.errors.AgentEventRefused`,
whose message names only the event and why: ``hostcore hook`` logs it, counts it as
that plugin's fault, and the agent goes on. The registry is the host's configured one,
created on the first start.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from hostcore.errors import RecordError
from hostcore_file_custody.agent_sessions import (
    AgentSessionResult,
    end_agent_session,
    refresh_agent_session,
    start_agent_session,
)
from hostcore_file_custody.errors import AgentEventRefused, CustodyError
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
    registry = HeartbeatRegistry(registry_path(host))
    # A held lock is waited on only within what is left of the hook's budget.
    wait = min(START_WAIT_SECONDS, max(_MIN_WAIT_SECONDS, event.budget_seconds))
    try:
        instance = check_instance(event.session_id)
        if event.name == "SessionStart":
            return start_agent_session(registry, instance, wait_seconds=wait)
        if event.name == "PostToolUse":
            return refresh_agent_session(registry, instance, wait_seconds=wait)
        return end_agent_session(registry, instance, wait_seconds=wait)
    except (CustodyError, RecordError, OSError) as exc:
        # Their messages name the session id and registry paths: the hook logs only why.
        raise AgentEventRefused(event.name, _reason(exc)) from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__} ({reason})" if isinstance(reason, str) else type(exc).__name__
