"""Conformance suites: the contracts the host relies on, as tests a plugin author reuses.

One module per kind (:mod:`~hostcore.testing.sink`, :mod:`~hostcore.testing.worker`,
:mod:`~hostcore.testing.policy_input`, :mod:`~hostcore.testing.provider`,
:mod:`~hostcore.testing.source`, :mod:`~hostcore.testing.destination`), and one for
the commands a plugin adds (:mod:`~hostcore.testing.command`) and one for its
agent-event hook (:mod:`~hostcore.testing.agent_event`); this module holds
what they share.

Subclass the suite for your plugin's kind in a test module and provide a
``plugin`` fixture (your plugin module or object); the suite's tests then run
against every object of that kind your plugin registers::

    import pytest
    from hostcore.testing import WorkerConformance

    import my_plugin


    class TestMyWorkerConformance(WorkerConformance):
        @pytest.fixture
        def plugin(self):
            return my_plugin

        @pytest.fixture
        def plugin_config(self):
            return {"plugins": {"my-plugin": {"batch": 2}}}   # optional

Each suite builds its hosts with the ``make_host`` fixture of
:mod:`hostcore.testing`, in a root of its own under ``tmp_path``, with your
plugin registered the way an installed plugin would be. A failed check says
which object broke which contract and what the host would do about it; it is
reported without a traceback from this module (your code's traceback is
included when your code raised).

Suites and the fixtures they add (defaults in brackets):

* :class:`TelemetrySinkConformance` — ``event_plugins`` [none]: plugins whose
  events the sink must also survive.
* :class:`WorkerConformance` — ``seed_work(host)`` [nothing]: give the worker a
  backlog larger than one run so the drain and resume checks mean something.
* :class:`PolicyInputConformance` — ``sample_directories`` [a few paths]: the
  directories your input knows, none of which may show in its fingerprint;
  ``change_policy(host)`` [None]: change the input's state so verdicts change.
* :class:`ProviderConformance` — ``break_backend(host)`` [required],
  ``seed_items(host)`` [nothing], ``foreign_ref`` [a ref nobody owns].
* :class:`SourceConformance` — ``add_evidence(host)`` and ``add_malformed(host)``
  [both required].
* :class:`DestinationConformance` — ``held_positions(host, stream, origin)``
  [required]: the positions the destination holds, read back.
* :class:`CommandConformance` — ``command_invocations`` [none]: argument lists
  (command name first) that must exit 0 against a fresh root.
* :class:`AgentEventConformance` — ``agent_events`` [one of each event, both
  agents] and ``seed_session(host)`` [nothing]: events the plugin does real work
  for, and what they need (a transcript).

Every suite also takes ``plugin_config`` (the host configuration as a mapping)
and ``host_env`` (the environment the hosts see, e.g. a fake tool on ``PATH``).
Every budget is a class attribute you may override, not a hidden constant.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from hostcore.plugin.loader import BUILTIN_PLUGINS
from hostcore.plugin.markers import hookimpl
from hostcore.plugin.registration import KINDS
from hostcore.telemetry import EventSpec

# A count no sink may choke on: the largest integer JSON consumers hold exactly.
LARGE_COUNT = 2**53 - 1
# Mean seconds one ``receive`` may take: sinks run inside the emitter's step.
RECEIVE_BUDGET_SECONDS = 0.05
# Runs a worker may need to drain a seeded backlog with no new input.
MAX_RUNS_TO_DRAIN = 100
# Mean seconds one ``fingerprint_part()`` may take: it is read on every export.
FINGERPRINT_BUDGET_SECONDS = 0.005
# Calls timed to measure that mean.
FINGERPRINT_CALLS = 50
# A fingerprint part is a short digest, not a serialisation of the input.
FINGERPRINT_MAX_CHARS = 128

PROBE_EVENT = EventSpec(
    "conformance.probe",
    {"count": int, "flag": bool, "choice": ("one", "two", "three")},
    "Emitted only by hostcore's conformance kit: one of every attribute type.",
)


class _ProbeEvents:
    """Catalogues :data:`PROBE_EVENT` so a sink meets every attribute type."""

    __name__ = "hostcore.testing.kit.probe"

    @hookimpl
    def hostcore_events(self) -> EventSpec:
        return PROBE_EVENT


def contract_failure(message: str, *, raised: BaseException | None = None) -> NoReturn:
    """Fail the current test with ``message`` (and the plugin's traceback, if any)."""
    if raised is not None:
        detail = "".join(traceback.format_exception(raised)).rstrip()
        message = f"{message}\n\nYour code raised:\n{detail}"
    pytest.fail(message, pytrace=False)


def require(condition: object, message: str) -> None:
    if not condition:
        contract_failure(message)


def plugin_label(plugin: object) -> str:
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def registered_objects(host: Any, plugin: object, kind: str) -> list[Any]:
    """The objects of ``kind`` that ``plugin`` registered in ``host``, at least one."""
    hook = KINDS[kind].hook
    name = host.plugins.pm.get_name(plugin)
    info = host.plugins.infos.get(name) if name else None
    if info is None:
        failed = [i for i in host.plugins.infos.values() if i.status == "failed"]
        info = next((i for i in failed if i.name == plugin_label(plugin)), None)
    if info is not None and info.status == "failed":
        contract_failure(f"plugin {plugin_label(plugin)!r} failed to load, so the host "
                         f"would skip it: {info.error}\n{info.traceback or ''}".rstrip())
    mine = {r.name for r in info.registrations if r.kind == kind} if info else set()
    objects = [o for o in host.registered(kind) if o.name in mine]
    require(objects, f"plugin {plugin_label(plugin)!r} registered no {kind}: its {hook} "
                     "hookimpl is missing or returned nothing (return the object, a list of "
                     "them, or None)")
    return objects


class _PluginSuite:
    """Fixtures every suite shares: the plugin under test and hosts built with it."""

    @pytest.fixture
    def plugin(self) -> object:
        contract_failure(
            f"{type(self).__name__} needs a `plugin` fixture returning your plugin module "
            "or object, e.g.\n\n    @pytest.fixture\n    def plugin(self):\n"
            "        return my_package.plugin\n")

    @pytest.fixture
    def plugin_config(self) -> Mapping[str, Any]:
        """The host configuration (a ``hostcore.toml`` as a mapping) to test with."""
        return {}

    @pytest.fixture
    def host_env(self) -> Mapping[str, str] | None:
        """The environment the hosts see (``host.env``); None means an empty one."""
        return None

    @pytest.fixture
    def conformance_root(self, tmp_path: Path) -> Path:
        return tmp_path / "conformance-root"

    @pytest.fixture
    def build_host(self, make_host: Callable[..., Any], plugin: object,
                   plugin_config: Mapping[str, Any], conformance_root: Path,
                   host_env: Mapping[str, str] | None) -> Callable[..., Any]:
        """Build a host with the plugin; each call is a restart over the same root."""

        # A built-in module is in every host already; registering it twice would fail.
        own = () if getattr(plugin, "__name__", None) in BUILTIN_PLUGINS else (plugin,)

        def build(*extra: object) -> Any:
            return make_host(*own, *extra, config=dict(plugin_config), root=conformance_root,
                             env=host_env)

        return build
