"""What a plugin's agent hooks want: :func:`agent_interest`, read by ``hostcore hook``.

``hostcore hook`` runs on every tool call of an agent, and most calls concern no
plugin. A ``hostcore_agent_event`` or ``hostcore_agent_gate`` hookimpl declares the
events it acts on with :func:`agent_interest`; the plugin index keeps the
declaration (:mod:`hostcore.agents.index`) and the hook's dispatcher
(:mod:`hostcore.agents.dispatch`) builds the host only for an event some plugin
wants. A hookimpl that declares nothing gets every event.

Imports only the standard library, and not :mod:`typing`: the dispatcher, which
must decide before anything heavy loads, takes the event names from here.
"""

from __future__ import annotations

import math

# typing is not imported (see above): mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import TypeVar

    _F = TypeVar("_F", bound=Callable[..., object])

# The events either agent documents; a name outside them is counted as unknown (a
# newer agent, or input that is not an agent's at all).
KNOWN_EVENTS = frozenset({
    "SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse",
    "PostToolUseFailure", "PermissionRequest", "Notification", "Stop", "SubagentStart",
    "SubagentStop", "PreCompact", "PostCompact",
})
# The events that carry a ``tool_name``: a declared list of tools narrows only these.
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure",
                         "PermissionRequest"})
# Where agent_interest keeps a declaration: an attribute of the hookimpl function.
INTEREST_ATTRIBUTE = "hostcore_agent_interest"


class AgentInterest:
    """One hookimpl's declaration. ``events``: the event names (``None``: every event).
    ``tools``: for tool events (:data:`TOOL_EVENTS`), the tool names (``None``: every
    tool); other events are not narrowed by it. ``every_seconds``: per event, the
    shortest time between two calls for one session; a call for any event of that
    session starts the interval again. ``lean``: ``"module:function"``, a handler
    doing the hookimpl's work for these events without a host
    (:mod:`hostcore.plugin.lean`), or ``None``."""

    __slots__ = ("events", "every_seconds", "lean", "tools")

    def __init__(self, events: tuple[str, ...] | None, tools: tuple[str, ...] | None,
                 every_seconds: dict[str, float], lean: str | None = None) -> None:
        self.events = events
        self.tools = tools
        self.every_seconds = every_seconds
        self.lean = lean

    def __repr__(self) -> str:
        return (f"AgentInterest(events={self.events!r}, tools={self.tools!r}, "
                f"every_seconds={self.every_seconds!r}, lean={self.lean!r})")


def agent_interest(*events: str, tools: Iterable[str] | None = None,
                   every_seconds: Mapping[str, float] | None = None,
                   lean: str | None = None) -> Callable[[_F], _F]:
    """Declare, on a ``hostcore_agent_event`` or ``hostcore_agent_gate`` hookimpl, the
    events it acts on, so a hook builds no host for the others (docs/agent-hooks.md)::

        @hookimpl
        @agent_interest("PostToolUse", "Stop", tools=("Write", "Edit"))
        def hostcore_agent_event(event, host): ...

    No event names means every event. ``lean="package.module:function"`` (on a
    ``hostcore_agent_event`` hookimpl only) names a handler the hook may call for
    these events instead, without building a host (:mod:`hostcore.plugin.lean`).
    Raises :class:`ValueError` for an event neither agent sends, an interval that is
    not a positive number of seconds or a lean handler that is no
    ``module:function`` name, when the plugin's module is imported: a typo fails the
    plugin, named, instead of silencing it.
    """
    unknown = sorted(set(events) - KNOWN_EVENTS)
    if unknown:
        raise ValueError(f"agent_interest: no agent sends {', '.join(unknown)}")
    intervals = dict(every_seconds or {})
    for name, seconds in intervals.items():
        if name not in KNOWN_EVENTS or (events and name not in events):
            raise ValueError(f"agent_interest: every_seconds names {name}, "
                             "not a declared event")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not math.isfinite(seconds) or seconds <= 0:
            raise ValueError(f"agent_interest: every_seconds[{name}] must be positive "
                             "seconds")
    if lean is not None and not is_handler_name(lean):
        raise ValueError(f"agent_interest: lean={lean!r} is no 'package.module:function'")
    interest = AgentInterest(tuple(sorted(set(events))) or None,
                             None if tools is None else tuple(sorted(set(tools))),
                             {name: float(seconds) for name, seconds in intervals.items()},
                             lean)

    def declare(function: _F) -> _F:
        setattr(function, INTEREST_ATTRIBUTE, interest)
        return function

    return declare


def is_handler_name(value: object) -> bool:
    """Whether ``value`` is a ``package.module:function`` name (dotted identifiers, one
    colon, a plain function name): what ``lean=`` takes and the dispatcher imports."""
    if not isinstance(value, str):
        return False
    module, colon, function = value.partition(":")
    return bool(colon) and function.isidentifier() and all(
        part.isidentifier() for part in module.split("."))
