"""What a gate returns from ``hostcore_agent_gate``: :class:`GateVerdict`.

A gate enforces a rule in an agent's loop (the staleness gate of
:mod:`hostcore.governance`); reporting stays elsewhere. It is the one way a plugin
changes how ``hostcore hook`` exits: a verdict that asks the agent to keep
working, at a Stop, makes the hook exit 2 with its message on stderr, which
Claude Code and Codex hand back to the model.
"""

from __future__ import annotations

import msgspec


class GateVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """A gate's answer to one agent event.

    ``keep_working``: at a Stop whose ``stop_hook_active`` is false, a message for
    the model saying what to do before stopping (the hook exits 2 with it); at
    any other event it is ignored. ``faults``: the kinds of the items the gate met
    and skipped (a path outside any repository, a file gone), each counted like
    any other hook fault; the agent is never failed for them.
    """

    keep_working: str | None = None
    faults: tuple[str, ...] = ()
