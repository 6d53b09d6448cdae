"""Test helpers for plugin authors, registered as a ``pytest11`` plugin.

The fixtures live in :mod:`~hostcore.testing.fixtures`, the conformance suites in
one module per kind (:mod:`~hostcore.testing.source` and its siblings); both
are importable from here.

Installing hostcore makes these fixtures available in every pytest run:

* ``make_host(*plugins, config=None, load_entrypoints=False)`` builds an isolated
  :class:`~hostcore.host.Host` in a fresh folder under ``tmp_path``; every host it
  made is closed when the test ends.
* ``collected_events`` is a telemetry sink included in every host ``make_host``
  builds; ``collected_events.names()`` lists what was emitted.
* ``register_plugin(obj)`` registers a plugin for the rest of one test: in every
  host ``make_host`` builds and every ``hostcore_cli`` run.
* ``hostcore_cli(*args, env=None)`` runs the CLI in-process against the test's
  root and returns a :class:`CliResult`.

Example::

    def test_my_source_ingests(make_host):
        host = make_host(my_plugin)
        assert host.tick().ok

Imports. This package is loaded by every pytest run where hostcore is installed, so at
module level it imports only the foundation modules (:mod:`hostcore.errors`,
:mod:`~hostcore.timestamps`, :mod:`~hostcore.config`, :mod:`~hostcore.files`,
:mod:`~hostcore.records`, :mod:`~hostcore.telemetry`), :mod:`hostcore.plugin` (not
:mod:`hostcore.plugin.cli`) and itself; :mod:`hostcore.host`, the CLI application
(:mod:`hostcore.cli`) and the value modules of :mod:`hostcore.evidence`,
:mod:`hostcore.export`, :mod:`hostcore.workitems` and :mod:`hostcore.agents` only inside
the functions that use them. Nothing in hostcore imports it (the 0.1 alias
``hostcore.conformance`` names it, by name).
"""

from hostcore.testing.agent_event import AgentEventConformance
from hostcore.testing.command import CommandConformance
from hostcore.testing.destination import DestinationConformance
from hostcore.testing.fixtures import (
    CliResult,
    EventCollector,
    collected_events,
    hostcore_cli,
    make_host,
    register_plugin,
    require_tool,
)
from hostcore.testing.policy_input import PolicyInputConformance
from hostcore.testing.provider import ProviderConformance
from hostcore.testing.sink import TelemetrySinkConformance
from hostcore.testing.source import SourceConformance
from hostcore.testing.worker import WorkerConformance

__all__ = [
    "AgentEventConformance",
    "CliResult",
    "CommandConformance",
    "DestinationConformance",
    "EventCollector",
    "PolicyInputConformance",
    "ProviderConformance",
    "SourceConformance",
    "TelemetrySinkConformance",
    "WorkerConformance",
    "collected_events",
    "hostcore_cli",
    "make_host",
    "register_plugin",
    "require_tool",
]
