"""The conformance suite for ``hostcore_agent_event`` (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

import contextlib
import inspect
import io
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from hostcore.plugin.calls import callers
from hostcore.plugin.loader import load_plugins
from hostcore.testing.kit import _PluginSuite, contract_failure, plugin_label, require

HOOK = "hostcore_agent_event"
# The agent events every plugin is sent, of both agents: the six hooks install.
SAMPLE_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                 "SessionEnd")
# What a call may take beyond the event's budget (seconds): a hook's own start.
BUDGET_SLACK_SECONDS = 0.25
# Mean seconds one call may take for a tool event (a hook runs on every tool call).
TOOL_EVENT_BUDGET_SECONDS = 0.02
# Calls timed to measure that mean.
TOOL_EVENT_CALLS = 20


class AgentEventConformance(_PluginSuite):
    """Checks the plugin's ``hostcore_agent_event``.

    Contract: the plugin implements the hook taking only ``event`` and ``host``;
    in a host holding the hook's lean plugin set (hostcore's core and agents
    built-ins and the plugin, nothing else), every event of both agents
    (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SessionEnd,
    with a transcript that does not exist) returns ``None`` without raising and
    prints nothing on stdout (the agent's); each call returns within the event's
    ``budget_seconds`` plus :data:`BUDGET_SLACK_SECONDS`, even with a budget of
    0; a tool event takes :data:`TOOL_EVENT_BUDGET_SECONDS` on average; each
    event of ``agent_events`` (override it with events your plugin does real
    work for, e.g. a Stop with a transcript ``seed_session`` wrote) can be sent
    twice, as agents do when a hook is retried; and, when the hookimpl declares
    what it wants (:func:`hostcore.plugin.interest.agent_interest`), the
    declaration covers every event of ``agent_events``; when it names a lean
    handler, the handler takes each of those events twice as a
    :class:`~hostcore.plugin.lean.LeanEvent` (with the plugin's table of
    ``plugin_config``, found under ``entry_point_name``), quietly, returning
    ``None``, within the budget.
    """

    budget_slack_seconds = BUDGET_SLACK_SECONDS
    tool_event_budget_seconds = TOOL_EVENT_BUDGET_SECONDS

    @pytest.fixture
    def agent_events(self, plugin: object, tmp_path: Path) -> Sequence[Any]:
        """Events the plugin acts on, each sent twice (default: the sample events its
        declaration, if any, wants)."""
        declared = _declared(plugin)
        return [e for e in sample_events(tmp_path) if declared is None or _wants(declared, e)]

    @pytest.fixture
    def entry_point_name(self) -> str | None:
        """The plugin's entry-point name, whose ``[plugins.<name>]`` table of
        ``plugin_config`` its lean handler is given (``None``: an empty table)."""
        return None

    @pytest.fixture
    def seed_session(self) -> Callable[[Any], None]:
        """Return a callable that prepares what ``agent_events`` name (transcripts)."""
        return lambda host: None

    @pytest.fixture
    def lean_host(self, plugin: object, plugin_config: Mapping[str, Any],
                  conformance_root: Path, host_env: Mapping[str, str] | None) -> Any:
        from hostcore.agents.hook import LEAN_BUILTINS
        from hostcore.host import Host

        plugins = load_plugins(LEAN_BUILTINS, (plugin,), load_entrypoints=False,
                               env=dict(host_env or {}))
        host = Host(root=conformance_root, config=dict(plugin_config), env=dict(host_env or {}),
                    plugin_set=plugins)
        yield host
        host.close()

    def _call(self, host: Any, plugin: object, event: Any) -> float:
        """Send ``event`` to the plugin alone; the seconds it took."""
        mine = [call for name, call in callers(host.plugins, HOOK)
                if host.plugins.plugin_object(name) is plugin]
        require(mine, f"plugin {plugin_label(plugin)!r} has no {HOOK} hookimpl (or it failed "
                      "to load); `hostcore hook` would never call it")
        printed = io.StringIO()
        started = time.monotonic()
        try:
            with contextlib.redirect_stdout(printed):
                result = mine[0](event=event, host=host)
        except Exception as exc:
            contract_failure(f"{HOOK} raised for a {event.agent} {event.name} event; the hook "
                             "would fail the plugin for that run and count a fault.", raised=exc)
        took = time.monotonic() - started
        # The caller gathers what the implementation returned that is not None.
        require(result == [], f"{HOOK} returned {result!r} for {event.name}; it must "
                              "return None")
        require(not printed.getvalue(),
                f"{HOOK} printed on stdout for {event.name}: stdout is the agent's, which "
                f"reads it as hook output; log instead. Printed: {printed.getvalue()[:200]!r}")
        return took

    def test_plugin_implements_the_hook_with_its_arguments(self, plugin: object) -> None:
        impl = getattr(plugin, HOOK, None)
        require(callable(impl), f"plugin {plugin_label(plugin)!r} defines no {HOOK}")
        assert impl is not None
        names = set(inspect.signature(impl).parameters) - {"self"}
        require(names <= {"event", "host"},
                f"{HOOK} takes {sorted(names)}; the hook passes only event and host")

    def test_every_event_of_both_agents_is_taken_quietly_within_its_budget(
            self, lean_host: Any, plugin: object, tmp_path: Path) -> None:
        import msgspec

        for event in sample_events(tmp_path):
            for budget in (event.budget_seconds, 0.0):
                sent = msgspec.structs.replace(event, budget_seconds=budget)
                took = self._call(lean_host, plugin, sent)
                require(took <= budget + self.budget_slack_seconds,
                        f"{HOOK} took {took:.2f} s for a {sent.agent} {sent.name} with "
                        f"{budget} s of budget; leave what does not fit to a worker's tick")

    def test_tool_events_cost_little(self, lean_host: Any, plugin: object,
                                     tmp_path: Path) -> None:
        events = [e for e in sample_events(tmp_path) if e.name in ("PreToolUse", "PostToolUse")]
        self._call(lean_host, plugin, events[0])  # first-use costs (imports) aside
        took = sum(self._call(lean_host, plugin, events[i % len(events)])
                   for i in range(TOOL_EVENT_CALLS)) / TOOL_EVENT_CALLS
        require(took <= self.tool_event_budget_seconds,
                f"{HOOK} takes {took * 1000:.1f} ms per tool event on average; it runs on "
                "every tool call an agent makes: return at once for events not yours")

    def test_its_declared_interest_covers_the_events_it_acts_on(
            self, plugin: object, agent_events: Sequence[Any]) -> None:
        declared = _declared(plugin)
        if declared is None:
            return  # no declaration: the hook sends it every event
        for event in agent_events:
            require(_wants(declared, event),
                    f"{HOOK} acts on {event.name} (agent_events names it) but its "
                    "agent_interest leaves it out: the hook would never send it")

    def test_each_event_can_be_sent_twice(self, lean_host: Any, plugin: object,
                                          agent_events: Sequence[Any],
                                          seed_session: Callable[[Any], None]) -> None:
        seed_session(lean_host)
        for event in agent_events:
            for _ in range(2):
                self._call(lean_host, plugin, event)


    def test_its_lean_handler_takes_the_events_as_the_hook_does(
            self, lean_host: Any, plugin: object, agent_events: Sequence[Any],
            seed_session: Callable[[Any], None], plugin_config: Mapping[str, Any],
            entry_point_name: str | None) -> None:
        import importlib

        from hostcore.config_tables import find_table
        from hostcore.plugin.lean import LeanEvent

        declared = _declared(plugin)
        if declared is None or declared.lean is None:
            return  # no lean handler: the hook always builds a host for it
        module_name, _, function_name = declared.lean.partition(":")
        try:
            handler = getattr(importlib.import_module(module_name), function_name)
        except (ImportError, AttributeError) as exc:
            contract_failure(f"agent_interest(lean={declared.lean!r}) names no function "
                             "the hook can import; it would fall back every time",
                             raised=exc)
        tables = plugin_config.get("plugins", {})
        found = find_table(tables, entry_point_name) if entry_point_name else None
        config = found[1] if found and isinstance(found[1], dict) else {}
        seed_session(lean_host)
        for event in agent_events:
            lean = LeanEvent(
                agent=event.agent, name=event.name, session_id=event.session_id,
                cwd=event.cwd, root=str(lean_host.root), config=config,
                budget_seconds=event.budget_seconds, transcript_path=event.transcript_path,
                tool_name=event.tool_name, tool_use_id=event.tool_use_id,
                source=event.source, reason=event.reason,
                stop_hook_active=event.stop_hook_active)
            for _ in range(2):
                printed = io.StringIO()
                started = time.monotonic()
                try:
                    with contextlib.redirect_stdout(printed):
                        result = handler(lean)
                except Exception as exc:
                    contract_failure(f"the lean handler {declared.lean} raised for a "
                                     f"{event.agent} {event.name}; the hook would count a "
                                     "fault and build the host after all", raised=exc)
                took = time.monotonic() - started
                require(result is None, f"the lean handler {declared.lean} returned "
                                        f"{result!r} for {event.name}; it must return None")
                require(not printed.getvalue(),
                        f"the lean handler {declared.lean} printed on stdout for "
                        f"{event.name}: stdout is the agent's")
                require(took <= event.budget_seconds + self.budget_slack_seconds,
                        f"the lean handler {declared.lean} took {took:.2f} s for "
                        f"{event.name} with {event.budget_seconds} s of budget")


def _declared(plugin: object) -> Any:
    """The plugin's :func:`~hostcore.plugin.interest.agent_interest` declaration, or
    ``None``; anything else found where one is kept fails the suite."""
    from hostcore.plugin.interest import INTEREST_ATTRIBUTE, AgentInterest

    impl = getattr(plugin, HOOK, None)
    declared = getattr(getattr(impl, "__func__", impl), INTEREST_ATTRIBUTE, None)
    require(declared is None or isinstance(declared, AgentInterest),
            f"{HOOK} carries {INTEREST_ATTRIBUTE} = {declared!r}, which is no declaration: "
            "use hostcore.plugin.interest.agent_interest")
    return declared


def _wants(declared: Any, event: Any) -> bool:
    from hostcore.plugin.interest import TOOL_EVENTS

    if declared.events is not None and event.name not in declared.events:
        return False
    return not (event.name in TOOL_EVENTS and declared.tools is not None
                and event.tool_name not in declared.tools)


def sample_events(folder: Path) -> list[Any]:
    """One event of each sample name for each agent, naming a transcript that does
    not exist under ``folder``."""
    from hostcore.agents.budget import budget_seconds
    from hostcore.agents.events import AGENTS, AgentEvent

    events = []
    for agent in AGENTS:
        for name in SAMPLE_EVENTS:
            tool = name.endswith("ToolUse")
            events.append(AgentEvent(
                agent=agent, name=name, session_id="conformance-session",
                cwd=str(folder), transcript_path=str(folder / "absent" / "session.jsonl"),
                tool_name="Bash" if tool else None, tool_use_id="tool-1" if tool else None,
                source="startup" if name == "SessionStart" else None,
                reason="other" if name == "SessionEnd" else None,
                budget_seconds=budget_seconds(name, agent, {})))
    return events
