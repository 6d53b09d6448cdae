"""hostcore: a small, embeddable plugin host for the local side of coding-agent infrastructure.

Importing this package is cheap and has no side effects: nothing heavier than the
standard library is imported until one of the names below is first used, and no
plugin is ever loaded at import time. Build a :class:`Host` to load plugins.

Imports: none of hostcore when this module runs (each name below is imported from its
home on first use; the imports under ``TYPE_CHECKING`` are for type checkers), so every
module of hostcore may import it, for ``__version__`` and ``HOOK_API_VERSION``. Inside
hostcore a name is imported from its home module, never through this one. What each
part of hostcore may import is in ``docs/architecture.md`` (Layout), checked by
``tests/test_import_rules.py``.
"""

from __future__ import annotations

# Not typing's: typing costs `hostcore hook` a sizeable part of its start, and mypy
# reads a constant of this name as typing's.
TYPE_CHECKING = False

__version__ = "0.2.8"

# The generation of the hook API (hostcore.plugin.hookspecs). Hooks only ever gain
# arguments and new hooks are only ever added, so one counter is enough: it goes up
# by one with each release that adds a hook or an argument, and never goes down.
# 1: hostcore 0.1. 2: hostcore 0.2, hostcore_published_ref gained `destination`.
# 3: hostcore 0.2.5, hostcore_agent_event. 4: hostcore 0.2.6, hostcore_governance_inputs
# and hostcore_agent_gate.
# docs/releasing.md says how it moves; tests/test_packaging_hook_api.py keeps it honest.
HOOK_API_VERSION = 4

# name -> module that defines it; resolved on first attribute access (PEP 562).
_LAZY = {
    "Host": "hostcore.host",
    "hookimpl": "hostcore.plugin.markers",
    "hookspec": "hostcore.plugin.markers",
    "EventSpec": "hostcore.telemetry",
    "Event": "hostcore.telemetry",
    "ConfigError": "hostcore.errors",
    "PluginLoadError": "hostcore.errors",
    "RecordError": "hostcore.errors",
    "HostcoreError": "hostcore.errors",
}

__all__ = [
    "HOOK_API_VERSION",
    "ConfigError",
    "Event",
    "EventSpec",
    "Host",
    "HostcoreError",
    "PluginLoadError",
    "RecordError",
    "__version__",
    "hookimpl",
    "hookspec",
]

if TYPE_CHECKING:
    from typing import Any

    from hostcore.errors import ConfigError, HostcoreError, PluginLoadError, RecordError
    from hostcore.host import Host
    from hostcore.plugin.markers import hookimpl, hookspec
    from hostcore.telemetry import Event, EventSpec


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'hostcore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
