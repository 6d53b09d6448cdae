"""The event a hook receives, typed: what Claude Code or Codex writes on a hook's stdin.

Both agents write one JSON object per hook run with ``hook_event_name``,
``session_id``, ``transcript_path`` and ``cwd``, plus fields per event (a tool's
name and id, a SessionStart's ``source``, a SessionEnd's ``reason``). Only those
identifying fields are decoded, and the paths a file-writing tool names
(:mod:`hostcore.agents.written`): prompts, the rest of tool input, tool output and
the last assistant message are skipped by the decoder, never held in an
:class:`AgentEvent`, so no plugin can keep what it was never given.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# Defined with the dispatcher and the declarations, which import only the standard library.
from hostcore.agents.dispatch import AGENTS, MAX_INPUT_BYTES
from hostcore.agents.written import written_paths
from hostcore.plugin.interest import KNOWN_EVENTS

__all__ = ["AGENTS", "KNOWN_EVENTS", "MAX_INPUT_BYTES", "Agent", "AgentEvent",
           "EventRefused", "decode_event"]

Agent = Literal["claude-code", "codex"]


class AgentEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One agent hook event, as plugins receive it in ``hostcore_agent_event``.

    ``agent`` is ``"claude-code"`` or ``"codex"``; ``name`` the agent's event name
    (``SessionStart``, ``PostToolUse``, ``Stop``, ``SessionEnd``, ...). ``session_id``,
    ``transcript_path`` and ``cwd`` are the agent's own; ``tool_name`` and
    ``tool_use_id`` are set on tool events, ``source`` on SessionStart (``startup``,
    ``resume``, ...), ``reason`` on SessionEnd, ``stop_hook_active`` on Stop.
    ``written`` holds, on a PostToolUse of a file-writing tool (Claude Code's
    ``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit``; Codex's ``apply_patch``),
    the files it wrote, taken against ``cwd`` when the agent named them relative.
    ``budget_seconds`` is what is left of this hook run's time for the plugins'
    work (SessionEnd's is small: Claude Code gives every SessionEnd hook together
    1.5 s); work past it is left to the next tick.
    """

    agent: Agent
    name: str
    session_id: str
    cwd: str
    transcript_path: str | None = None
    tool_name: str | None = None
    tool_use_id: str | None = None
    source: str | None = None
    reason: str | None = None
    stop_hook_active: bool = False
    written: tuple[str, ...] = ()
    budget_seconds: float = 0.0


class _Payload(msgspec.Struct):
    """The fields of a hook's stdin that an :class:`AgentEvent` keeps; the rest of the
    object (prompt, tool input and response) is skipped unread."""

    hook_event_name: str
    session_id: str
    cwd: str = ""
    transcript_path: str | None = None
    tool_name: str | None = None
    tool_use_id: str | None = None
    source: str | None = None
    reason: str | None = None
    stop_hook_active: bool = False
    # Kept undecoded: only a file-writing tool's is read, and only for its paths.
    tool_input: msgspec.Raw = msgspec.Raw()


_decoder = msgspec.json.Decoder(_Payload)


class EventRefused(Exception):
    """The input is no event this host takes; ``kind`` says why, for the fault count:
    ``bad_json``, ``missing_fields``, ``unknown_event`` or ``oversized``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def decode_event(data: bytes, agent: Agent, *, budget_seconds: float) -> AgentEvent:
    """The :class:`AgentEvent` in ``data`` (a hook's stdin); :class:`EventRefused`
    when it is not one."""
    try:
        payload = _decoder.decode(data)
    except msgspec.ValidationError as exc:
        # The message names the field and the type expected, never a value.
        raise EventRefused("missing_fields", str(exc)) from None
    except msgspec.DecodeError:
        raise EventRefused("bad_json", "stdin is not one JSON object") from None
    if payload.hook_event_name not in KNOWN_EVENTS:
        raise EventRefused("unknown_event", "hook_event_name is no event either agent sends")
    if not payload.session_id:
        raise EventRefused("missing_fields", "session_id is empty")
    return AgentEvent(agent=agent, name=payload.hook_event_name,
                      session_id=payload.session_id, cwd=payload.cwd,
                      transcript_path=payload.transcript_path or None,
                      tool_name=payload.tool_name, tool_use_id=payload.tool_use_id,
                      source=payload.source, reason=payload.reason,
                      stop_hook_active=payload.stop_hook_active,
                      written=written_paths(payload.tool_name, payload.tool_input,
                                            payload.cwd)
                      if payload.hook_event_name == "PostToolUse" else (),
                      budget_seconds=budget_seconds)
