"""The loader's manager finds a module plugin's hookimpls from its ``__dict__``
(hostcore.plugin.loader._PluginManager): exactly what pluggy's own lookup finds."""

from __future__ import annotations

import importlib
import types

import pluggy

from hostcore import hookimpl
from hostcore.plugin import hookspecs
from hostcore.plugin.discovery import entry_points
from hostcore.plugin.loader import BUILTIN_PLUGINS, _PluginManager
from hostcore.plugin.markers import ENTRY_POINT_GROUP, PROJECT_NAME


def found_by(manager: pluggy.PluginManager, plugin: object) -> dict[str, object]:
    """Every name of ``plugin`` with the hookimpl options ``manager`` reads there."""
    return {name: manager.parse_hookimpl_opts(plugin, name) for name in dir(plugin)}


def managers() -> tuple[pluggy.PluginManager, pluggy.PluginManager]:
    ours, theirs = _PluginManager(PROJECT_NAME), pluggy.PluginManager(PROJECT_NAME)
    for manager in (ours, theirs):
        manager.add_hookspecs(hookspecs)
    return ours, theirs


def test_every_builtin_and_installed_plugin_module_gets_the_hookimpls_pluggy_finds():
    ours, theirs = managers()
    modules = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    modules += [ep.load() for ep in entry_points(ENTRY_POINT_GROUP)]
    assert len(modules) >= 15  # the built-ins and every first-party and contrib plugin
    found = 0
    for module in modules:
        expected = found_by(theirs, module)
        assert found_by(ours, module) == expected, module.__name__
        found += sum(opts is not None for opts in expected.values())
    assert found >= 40  # hookimpls were there to find, not just None everywhere


def sample_module() -> types.ModuleType:
    """A module plugin holding every kind of value pluggy's lookup tells apart."""

    class Holder:
        @staticmethod
        @hookimpl
        def static_impl() -> None: ...

        @classmethod
        @hookimpl
        def class_impl(cls) -> None: ...

        @hookimpl
        def method_impl(self) -> None: ...

    @hookimpl(specname="hostcore_workers")
    def renamed(host: object) -> list[object]:  # a hookimpl under another name
        return []

    @hookimpl
    def hostcore_events() -> list[object]:
        return []

    def plain() -> None: ...

    def lazy(name: str) -> object:  # a package's module-level __getattr__
        raise AttributeError(name)

    module = types.ModuleType("sample_plugin")
    plain.hostcore_impl = ["not", "a", "dict"]  # type: ignore[attr-defined]
    module.__dict__.update(
        renamed=renamed, hostcore_events=hostcore_events, plain=plain, __getattr__=lazy,
        static_wrapper=Holder.__dict__["static_impl"],
        class_wrapper=Holder.__dict__["class_impl"], bound=Holder().method_impl,
        Holder=Holder, number=3, text="hostcore_impl", __annotations__={"number": int})
    return module


def test_a_module_of_every_kind_of_value_gets_what_pluggy_finds():
    ours, theirs = managers()
    module = sample_module()
    expected = found_by(theirs, module)
    assert found_by(ours, module) == expected
    hooks = {name for name, opts in expected.items() if opts is not None}
    assert {"renamed", "hostcore_events", "bound", "static_wrapper"} <= hooks
    assert expected["plain"] is None and expected["number"] is None


def test_a_class_or_an_instance_plugin_is_left_to_pluggy():
    ours, theirs = managers()

    class Plugin:
        @hookimpl
        def hostcore_events(self) -> list[object]:
            return []

        @property
        def hostcore_workers(self) -> object:  # never evaluated by either
            raise AssertionError("a property was evaluated")

    for plugin in (Plugin, Plugin()):
        assert found_by(ours, plugin) == found_by(theirs, plugin)
        assert found_by(ours, plugin)["hostcore_events"] is not None
