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
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.errors import RecordError
from hostcore_file_custody.agent_events import AGENT_EVENTS_HANDLED
from hostcore_file_custody.agent_sessions import (
    AgentSessionResult,
    end_agent_session,
    refresh_agent_session,
    start_agent_session,
)
from hostcore_file_custody.errors import AgentEventRefused, CustodyError
from hostcore_file_custody.registry import START_WAIT_SECONDS, HeartbeatRegistry, check_instance
from hostcore_file_custody.settings import PLUGIN_NAME, CustodyConfig, registry_folder
from hostcore_file_custody.support import AVAILABLE

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host
    from hostcore.plugin.lean import LeanEvent

# The shortest lock wait worth trying when the hook's budget is nearly spent (seconds).
_MIN_WAIT_SECONDS = 0.05


def handle_agent_event(event: AgentEvent, host: Host) -> AgentSessionResult | None:
    """Start, refresh or end the event's agent-owned session; ``None`` for events
    custody does not handle, and where custody cannot run (Windows)."""
    if event.name not in AGENT_EVENTS_HANDLED or not AVAILABLE:
        return None
    folder = registry_folder(host.root, host.plugin_config(PLUGIN_NAME, CustodyConfig))
    return _handle(event.name, event.session_id, event.budget_seconds, folder)


def handle_lean_event(event: LeanEvent) -> None:
    """:func:`handle_agent_event` without a host: the hook's lean handler
    (``agent_interest(lean=...)`` in plugin.py), which spares the agent the host's
    imports at every start, due refresh and end. The config table is validated as the
    host validates it; a bad one raises, and the hook then calls the full hook, which
    reports it. Safe to run again after it raised: a start by the same agent resumes,
    a refresh or an end already written is one read."""
    if event.name not in AGENT_EVENTS_HANDLED or not AVAILABLE:
        return
    config = msgspec.convert(event.config, CustodyConfig)
    _handle(event.name, event.session_id, event.budget_seconds,
            registry_folder(Path(event.root), config))


def _handle(name: str, session_id: str, budget_seconds: float, folder: Path
            ) -> AgentSessionResult:
    registry = HeartbeatRegistry(folder)
    # A held lock is waited on only within what is left of the hook's budget.
    wait = min(START_WAIT_SECONDS, max(_MIN_WAIT_SECONDS, budget_seconds))
    try:
        instance = check_instance(session_id)
        if name == "SessionStart":
            return start_agent_session(registry, instance, wait_seconds=wait)
        if name == "PostToolUse":
            return refresh_agent_session(registry, instance, wait_seconds=wait)
        return end_agent_session(registry, instance, wait_seconds=wait)
    except (CustodyError, RecordError, OSError) as exc:
        # Their messages name the session id and registry paths: the hook logs only why.
        raise AgentEventRefused(name, _reason(exc)) from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__} ({reason})" if isinstance(reason, str) else type(exc).__name__
