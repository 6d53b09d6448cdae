"""Which installed plugins implement ``hostcore_agent_event`` or ``hostcore_agent_gate``,
and for which events, cached under the root.

A hook runs on every tool call, so it may not import every installed plugin to
learn which ones react to agent events. The first hook after the installed
plugins change loads them all once and writes ``<root>/agents/plugin-index.json``:
the built-ins and entry-point plugins implementing either hook, and what each
declared with :func:`~hostcore.agents.events.agent_interest` (events, tools, an
interval per event, a lean handler). Every later hook reads it with the standard library alone
(:mod:`hostcore.agents.dispatch`) and builds the host only when a plugin is due,
loading only the due ones. The cache is keyed by the folders on ``sys.path`` as they
are (see :func:`~hostcore.agents.dispatch.signature`), by the allow and block lists
and by its own format, so installing, removing or upgrading a plugin, or changing
the lists, rebuilds it. A plugin edited in place (an editable install gaining the
hook or changing its declaration) is seen after ``hostcore hooks install``, which
rebuilds the index.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import msgspec

from hostcore.agents.dispatch import INDEX_FILE, signature
from hostcore.files import atomic_write
from hostcore.plugin.discovery import DistLabel, FoundEntryPoint
from hostcore.plugin.interest import INTEREST_ATTRIBUTE, AgentInterest
from hostcore.plugin.loader import PluginSet

__all__ = ["FILE", "GATE_HOOK", "HOOK", "IndexedEntryPoint", "Interest", "PluginIndex",
           "build", "entry_points_of", "signature", "write"]

FILE = Path(INDEX_FILE)
HOOK = "hostcore_agent_event"
# Called after HOOK at every event; the only hook that can make a hook run exit 2.
GATE_HOOK = "hostcore_agent_gate"
# The governance domain's hook (hostcore.governance.inputs), named: this domain imports
# no other.
INPUTS_HOOK = "hostcore_governance_inputs"


class Interest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A plugin's declaration (:class:`~hostcore.plugin.interest.AgentInterest`), as
    the index keeps it."""

    events: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    every_seconds: dict[str, float] = {}
    lean: str | None = None


class IndexedEntryPoint(msgspec.Struct, frozen=True):
    """An entry-point plugin as discovery found it (:class:`~hostcore.plugin.discovery.
    FoundEntryPoint`): a hook loads it from this, reading no metadata file."""

    value: str
    distribution: str
    version: str | None
    requires: tuple[str, ...]


class PluginIndex(msgspec.Struct, frozen=True):
    """The plugins implementing :data:`HOOK` or :data:`GATE_HOOK`, for one set of
    installed plugins (``signature``): ``plugins`` the entry-point ones, ``builtins``
    the host's own, ``interests`` what each declared, one per hookimpl (a plugin
    absent from it takes every event)."""

    signature: str
    plugins: tuple[str, ...]
    builtins: tuple[str, ...] = ()
    interests: dict[str, tuple[Interest, ...]] = {}
    entry_points: dict[str, IndexedEntryPoint] = {}


def build(plugins: PluginSet, expected: str,
          found: Sequence[FoundEntryPoint] = ()) -> PluginIndex:
    """The index of ``plugins`` (every installed plugin, loaded from the entry points
    ``found``) for ``expected``."""
    declared: dict[str, list[AgentInterest | None]] = {}
    leans: dict[int, str | None] = {}  # by id of an AgentInterest: what it may call
    for hook_name in (HOOK, GATE_HOOK):
        for impl in getattr(plugins.pm.hook, hook_name).get_hookimpls():
            interest = getattr(impl.function, INTEREST_ATTRIBUTE, None)
            declared.setdefault(impl.plugin_name, []).append(interest)
            if isinstance(interest, AgentInterest):
                # Only the event hook has a lean form: a gate's verdict needs a host.
                leans[id(interest)] = interest.lean if hook_name == HOOK else None
    # A gate resolves governance in the hook's host: a plugin contributing governing
    # inputs is loaded for the events a gate wants, or a stamp a hook made would lack
    # its part and `hostcore check` (every plugin loaded) would call the file stale.
    gates = [getattr(impl.function, INTEREST_ATTRIBUTE, None)
             for impl in getattr(plugins.pm.hook, GATE_HOOK).get_hookimpls()]
    for impl in getattr(plugins.pm.hook, INPUTS_HOOK).get_hookimpls() if gates else ():
        declared.setdefault(impl.plugin_name, []).extend(gates)
    # A plugin with a hookimpl that declared nothing takes every event: what it left
    # undeclared may want any.
    interests = {}
    for name, hooks in declared.items():
        kept = [Interest(events=i.events, tools=i.tools, every_seconds=i.every_seconds,
                         lean=leans.get(id(i)))
                for i in hooks if isinstance(i, AgentInterest)]
        if len(kept) == len(hooks):
            interests[name] = tuple(kept)
    infos = plugins.infos
    loaded = tuple(sorted(n for n in declared if n in infos and infos[n].status == "loaded"))
    points = {ep.name: IndexedEntryPoint(ep.value, ep.dist.name, ep.dist.version,
                                         ep.dist.requires)
              for ep in found if ep.name in loaded}
    return PluginIndex(
        expected, loaded,
        tuple(n for n in infos if n in declared and infos[n].status == "builtin"),
        interests, points)


def entry_points_of(found: Mapping[str, object], names: Collection[str]
                    ) -> list[FoundEntryPoint] | None:
    """The entry points of the plugins ``names`` as the index ``found`` (JSON) keeps
    them, or ``None`` when it does not keep one of them (then discovery finds them)."""
    kept = found.get("entry_points")
    if not isinstance(kept, dict):
        return None
    points = []
    for name in names:
        try:
            ep = msgspec.convert(kept[name], IndexedEntryPoint)
        except (KeyError, msgspec.ValidationError):
            return None
        points.append(FoundEntryPoint(name, ep.value,
                                      DistLabel(ep.distribution, ep.version, ep.requires)))
    return points


def write(root: Path, index: PluginIndex) -> None:
    # Not durable: a cache lost in a power cut is rebuilt by the next hook.
    atomic_write(root / FILE, msgspec.json.encode(index), durable=False)
