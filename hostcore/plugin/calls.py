"""Calling a hook one plugin at a time, so a plugin's fault stays its own.

pluggy calls every implementation of a hook in one go: the first that raises
ends the call, and the implementations after it never run. The host instead
calls each plugin through a caller limited to it (``subset_hook_caller``, so the
plugin's own wrappers still wrap its implementation) and, when one raises,
records it on that plugin's :class:`~hostcore.plugin.loader.PluginInfo` as
``failed`` (the plugin is unregistered, and whatever it registered dropped) and
goes on with the next. A built-in that raises is hostcore's own bug and is
raised; so is every failure in strict mode.

What a plugin prints while its hook runs goes to stderr: hostcore's stdout is
kept for what hostcore prints (``status --json`` must stay parseable).

:data:`~hostcore.host.Host.hook` stays pluggy's own relay (one call for every
implementation, as fast as pluggy): it is for embedders that want exactly that.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Literal

from hostcore.plugin.loader import PluginSet, one_line

# "registration": the order plugins were registered in (built-ins first, so a
# built-in's name is taken before any plugin can take it); "call": pluggy's own
# order (last registered first), for hooks whose first answer wins.
Order = Literal["registration", "call"]


def callers(plugins: PluginSet, hook_name: str, *, order: Order = "call"
            ) -> Iterator[tuple[str, Callable[..., Any]]]:
    """``(plugin name, caller of hook_name limited to that plugin)`` for each plugin
    implementing it, wrappers aside (a wrapper wraps its own plugin's call)."""
    pm = plugins.pm
    impls = [i for i in getattr(pm.hook, hook_name).get_hookimpls()
             if not (i.hookwrapper or i.wrapper)]
    if order == "call":
        impls.reverse()
    everyone = [plugin for _, plugin in pm.list_name_plugin()]
    seen: set[int] = set()
    for impl in impls:
        if id(impl.plugin) in seen:  # two implementations of one hook (specname)
            continue
        seen.add(id(impl.plugin))
        others = [p for p in everyone if p is not impl.plugin]
        yield impl.plugin_name, pm.subset_hook_caller(hook_name, remove_plugins=others)


def guarded(plugins: PluginSet, plugin_name: str, hook_name: str,
            call: Callable[..., Any], /, **kwargs: Any) -> tuple[bool, Any]:
    """``(True, result)`` of ``call(**kwargs)``, or ``(False, None)`` after recording
    the plugin failed (raised instead for a built-in, or in strict mode)."""
    try:
        with plugin_output():
            return True, call(**kwargs)
    except (Exception, SystemExit) as exc:
        # SystemExit too: a plugin calling sys.exit() is a failing plugin, not a
        # request to end hostcore.
        failed(plugins, plugin_name, hook_name, exc)
        return False, None


def plugin_output() -> contextlib.AbstractContextManager[object]:
    """While plugin code runs: what it prints goes to stderr, not hostcore's stdout."""
    return contextlib.redirect_stdout(sys.stderr)


def failed(plugins: PluginSet, plugin_name: str, hook_name: str,
           exc: BaseException) -> None:
    """Record that ``plugin_name``'s ``hook_name`` raised ``exc`` (``exc`` is re-raised
    for a built-in, a :class:`~hostcore.errors.PluginLoadError` raised in strict mode)."""
    info = plugins.infos.get(plugin_name)
    if info is None or info.status == "builtin":
        raise exc
    if info.status == "failed":
        return  # failed already, by something its own hook set off
    plugins.fail(info, f"{hook_name} raised {one_line(exc)}",
                 "".join(traceback.format_exception(exc)))


def first_result(plugins: PluginSet, hook_name: str, /, **kwargs: Any) -> Any:
    """The first non-``None`` answer to a ``firstresult`` hook, in pluggy's order; a
    plugin that raises is recorded and the next one asked."""
    for plugin_name, call in callers(plugins, hook_name):
        ok, result = guarded(plugins, plugin_name, hook_name, call, **kwargs)
        if ok and result is not None:
            return result
    return None

