"""The event a plugin's lean handler receives: :class:`LeanEvent`.

A ``hostcore_agent_event`` hookimpl can name, with
``agent_interest(..., lean="package.module:function")``
(:func:`~hostcore.plugin.interest.agent_interest`), a function that does the same
work for the declared events without a host. ``hostcore hook`` then calls that
function straight from its dispatcher, when every plugin due for an event has one,
and builds no host: no pluggy, no store, no other plugin is imported. The contract
(docs/agent-hooks.md):

* the function takes one :class:`LeanEvent` and returns nothing; what it prints goes
  to stderr;
* it raises for anything it cannot do: the hook then calls the plugin's
  ``hostcore_agent_event`` the usual way, with a host, for this event, and counts a
  ``lean_failed`` fault; so the work must be safe to run again after it raised;
* its module should import little (that is its point): what it imports is what the
  agent waits for on each of these events.

Imports only the standard library, and not :mod:`typing` (see
:mod:`hostcore.plugin.interest`).
"""

from __future__ import annotations

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class LeanEvent:
    """One agent hook event, as a lean handler receives it.

    The identifying fields of :class:`~hostcore.agents.events.AgentEvent` (``agent``,
    ``name``, ``session_id``, ``cwd``, ``transcript_path``, ``tool_name``,
    ``tool_use_id``, ``source``, ``reason``, ``stop_hook_active``,
    ``budget_seconds``), without ``written``: a handler that needs the files a tool
    wrote uses the full hook. Then what a host would have given: ``root``, the state
    folder (absolute), and ``config``, the plugin's own ``[plugins.<name>]`` table as
    TOML parsed it (empty when there is none), for the handler to validate as its
    host-side code does.
    """

    __slots__ = ("agent", "budget_seconds", "config", "cwd", "name", "reason", "root",
                 "session_id", "source", "stop_hook_active", "tool_name", "tool_use_id",
                 "transcript_path")

    def __init__(self, *, agent: str, name: str, session_id: str, cwd: str, root: str,
                 config: Mapping[str, object], budget_seconds: float,
                 transcript_path: str | None = None, tool_name: str | None = None,
                 tool_use_id: str | None = None, source: str | None = None,
                 reason: str | None = None, stop_hook_active: bool = False) -> None:
        self.agent = agent
        self.name = name
        self.session_id = session_id
        self.cwd = cwd
        self.root = root
        self.config = config
        self.budget_seconds = budget_seconds
        self.transcript_path = transcript_path
        self.tool_name = tool_name
        self.tool_use_id = tool_use_id
        self.source = source
        self.reason = reason
        self.stop_hook_active = stop_hook_active

    def __repr__(self) -> str:
        # Names only: the payload's paths and ids are the agent's, not for logs.
        return f"LeanEvent(agent={self.agent!r}, name={self.name!r})"
