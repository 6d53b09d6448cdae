"""The typed registry: what every loaded plugin registered, validated, by kind.

Building a :class:`Registry` calls each registration hook once per plugin
(``hostcore_events`` first, then one hook per kind in :data:`KINDS` order) and
validates every object returned. A plugin whose hook raises, or that returns
an invalid object or a name another plugin already registered, is failed as a
whole (nothing it registered is kept) and reported by name; the others load.
A built-in's failure is hostcore's own bug and is raised.

:meth:`Registry.get` is typed per kind, so ``registry.get("source")`` is a
``tuple[Source, ...]`` to the type checker.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, cast, overload

from hostcore.errors import ConfigError, RegistrationError
from hostcore.plugin.calls import callers, plugin_output
from hostcore.plugin.loader import PluginInfo, PluginSet, Registration
from hostcore.plugin.registration import (
    KINDS,
    Destination,
    PolicyInput,
    Provider,
    Registered,
    Source,
    TelemetrySink,
    Worker,
    as_objects,
    availability,
    validate,
)
from hostcore.telemetry import Catalog, EventSpec

if TYPE_CHECKING:
    from hostcore.host import Host

KindKey = Literal["source", "provider", "policy_input", "telemetry_sink", "worker",
                  "destination"]


class Registry:
    """Validated registrations of one host's plugins, in registration order."""

    def __init__(self, plugins: PluginSet) -> None:
        self.plugins = plugins
        self._by_kind: dict[str, list[Registered]] = {key: [] for key in KINDS}
        plugins.on_fail.append(self._forget)

    # -- collecting ----------------------------------------------------------------

    def collect_events(self, catalog: Catalog) -> None:
        """Add every plugin's ``hostcore_events`` to ``catalog``."""
        for plugin_name, call in callers(self.plugins, "hostcore_events", order="registration"):
            try:
                with plugin_output():
                    answers = call()
                for results in answers:
                    for spec in as_objects(results):
                        catalog.add(_as_spec(spec), owner=self.owner(plugin_name))
            except (Exception, SystemExit) as exc:
                self._reject(plugin_name, exc)

    def collect(self, host: Host) -> None:
        """Call every registration hook once, validate, and keep what passes."""
        seen: dict[tuple[str, str], str] = {}
        for kind in KINDS.values():
            for plugin_name, call in callers(self.plugins, kind.hook, order="registration"):
                owner = self.owner(plugin_name)
                try:
                    with plugin_output():
                        answers = call(host=host)
                    objects = [o for r in answers for o in as_objects(r)]
                    names = []
                    for obj in objects:
                        validate(kind, obj, owner)
                        name = str(getattr(obj, "name"))  # noqa: B009 (checked by validate)
                        if (kind.key, name) in seen:
                            raise RegistrationError(
                                f"{kind.key} name {name!r} from {owner} is already "
                                f"registered by {seen[(kind.key, name)]}")
                        names.append(name)
                except ConfigError:
                    raise  # a user's config mistake: exit 2, not a plugin failure
                except (Exception, SystemExit) as exc:  # sys.exit() in a plugin: its fault
                    self._reject(plugin_name, exc)
                    continue
                info = self.plugins.infos[plugin_name]
                for obj, name in zip(objects, names, strict=True):
                    seen[(kind.key, name)] = owner
                    self._by_kind[kind.key].append(cast(Registered, obj))  # validated
                    info.registrations.append(Registration(kind=kind.key, name=name))
        self._by_kind["worker"].sort(key=lambda w: int(getattr(w, "order", 100)))

    def owner(self, plugin_name: str) -> str:
        """``plugin 'name' (distribution)``: how messages name a plugin."""
        info = self.plugins.infos.get(plugin_name)
        if info and info.distribution:
            return f"plugin {plugin_name!r} ({info.distribution})"
        return f"plugin {plugin_name!r}"

    def _reject(self, plugin_name: str, exc: BaseException) -> None:
        info = self.plugins.infos[plugin_name]
        if info.status == "builtin":
            raise exc
        self.plugins.fail(info, f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def _forget(self, info: PluginInfo) -> None:
        """Drop everything a failing plugin registered: half a plugin is worse than none."""
        for kind_key, objects in self._by_kind.items():
            mine = {r.name for r in info.registrations if r.kind == kind_key}
            if mine:
                objects[:] = [o for o in objects if getattr(o, "name", None) not in mine]

    # -- reading -------------------------------------------------------------------

    @overload
    def get(self, kind: Literal["source"]) -> tuple[Source, ...]: ...
    @overload
    def get(self, kind: Literal["provider"]) -> tuple[Provider, ...]: ...
    @overload
    def get(self, kind: Literal["policy_input"]) -> tuple[PolicyInput, ...]: ...
    @overload
    def get(self, kind: Literal["telemetry_sink"]) -> tuple[TelemetrySink, ...]: ...
    @overload
    def get(self, kind: Literal["worker"]) -> tuple[Worker, ...]: ...
    @overload
    def get(self, kind: Literal["destination"]) -> tuple[Destination, ...]: ...
    @overload
    def get(self, kind: str) -> tuple[Registered, ...]: ...

    def get(self, kind: str) -> tuple[Registered, ...]:
        """The validated objects of one kind, in registration order (workers by order)."""
        if kind not in self._by_kind:
            raise KeyError(f"{kind!r} is not a registration kind ({', '.join(KINDS)})")
        return tuple(self._by_kind[kind])

    def find(self, kind: str, name: str) -> Registered | None:
        """The object of ``kind`` called ``name``, if registered."""
        return next((o for o in self._by_kind.get(kind, ()) if o.name == name), None)

    def items(self) -> Iterator[tuple[str, tuple[Registered, ...]]]:
        """``(kind, objects)`` for every kind, in :data:`KINDS` order."""
        for kind in KINDS:
            yield kind, tuple(self._by_kind[kind])

    def infos(self) -> list[PluginInfo]:
        """Every plugin considered, with each registration's availability now."""
        for info in self.plugins.infos.values():
            for reg in info.registrations:
                reason = availability(self.find(reg.kind, reg.name))
                reg.available, reg.reason = reason is None, reason
        return list(self.plugins.infos.values())


def _as_spec(spec: object) -> EventSpec:
    if not isinstance(spec, EventSpec):
        raise RegistrationError(f"hostcore_events returned {type(spec).__name__}, "
                                "not hostcore.EventSpec")
    return spec
