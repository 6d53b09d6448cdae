"""Conformance suites: the contracts the host relies on, as tests a plugin author reuses.

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

Every suite also takes ``plugin_config`` (the host configuration as a mapping)
and ``host_env`` (the environment the hosts see, e.g. a fake tool on ``PATH``).
Every budget is a class attribute you may override, not a hidden constant.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from hostcore.builtins import BUILTIN_PLUGINS
from hostcore.markers import hookimpl
from hostcore.telemetry import Event, EventSpec
from hostcore.types import KINDS, WorkerResult, validate

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

    __name__ = "hostcore.conformance.probe"

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


# -- telemetry sinks -------------------------------------------------------------------


def sample_events(spec: EventSpec) -> Iterator[Event]:
    """Events covering ``spec``: typical, extreme, every enum value, and bare."""
    def values(pick: Callable[[Any], Any]) -> dict[str, Any]:
        return {key: pick(kind) for key, kind in spec.attributes.items()}

    now = time.time()
    yield Event(spec.name, now, values(lambda k: 3 if k is int else True if k is bool else k[0]))
    yield Event(spec.name, now, values(
        lambda k: LARGE_COUNT if k is int else False if k is bool else k[-1]))
    yield Event(spec.name, now, values(lambda k: 0 if k is int else False if k is bool else k[0]))
    enums = {key: kind for key, kind in spec.attributes.items() if isinstance(kind, tuple)}
    for key, kind in enums.items():
        for value in kind:
            yield Event(spec.name, now, {key: value})
    yield Event(spec.name, now, {})


class TelemetrySinkConformance(_PluginSuite):
    """Checks every telemetry sink the plugin registers.

    Contract: ``receive(event)`` accepts every catalogued event — every attribute
    type, extreme counts, any subset of attributes — without raising, without
    changing the event, and quickly (it runs inside the emitting step); ``close()``,
    if defined, works after events were received.
    """

    receive_budget_seconds = RECEIVE_BUDGET_SECONDS

    @pytest.fixture
    def event_plugins(self) -> tuple[object, ...]:
        """Plugins whose catalogued events the sink must also survive."""
        return ()

    @pytest.fixture
    def sink_host(self, build_host: Callable[..., Any],
                  event_plugins: tuple[object, ...]) -> Any:
        return build_host(_ProbeEvents(), *event_plugins)

    @pytest.fixture
    def sinks(self, sink_host: Any, plugin: object) -> list[Any]:
        return registered_objects(sink_host, plugin, "telemetry_sink")

    def _events(self, host: Any) -> list[Event]:
        return [event for spec in host.catalog for event in sample_events(spec)]

    def test_sink_is_a_valid_registration(self, sinks: list[Any]) -> None:
        for sink in sinks:
            try:
                validate(KINDS["telemetry_sink"], sink, "the sink")
            except Exception as exc:
                contract_failure(str(exc))

    def test_sink_survives_every_catalogued_event(self, sink_host: Any,
                                                  sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            for event in events:
                try:
                    sink.receive(event)
                except Exception as exc:
                    contract_failure(
                        f"sink {sink.name!r} raised on event {event.name!r} with attributes "
                        f"{event.attributes}. A sink must accept every catalogued event, any "
                        "declared attribute may be omitted; the host would count the failure "
                        "and the event would be lost for this sink.", raised=exc)

    def test_sink_leaves_events_unchanged(self, sink_host: Any, sinks: list[Any]) -> None:
        for sink in sinks:
            for event in self._events(sink_host):
                before = dict(event.attributes)
                sink.receive(event)
                require(event.attributes == before,
                        f"sink {sink.name!r} changed the attributes of event {event.name!r} "
                        f"from {before} to {event.attributes}; every sink receives the same "
                        "event object, so copy before you modify.")

    def test_sink_receives_quickly(self, sink_host: Any, sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            started = time.perf_counter()
            for event in events:
                sink.receive(event)
            mean = (time.perf_counter() - started) / len(events)
            require(mean <= self.receive_budget_seconds,
                    f"sink {sink.name!r} took {mean * 1000:.1f} ms per event on average "
                    f"(budget {self.receive_budget_seconds * 1000:.0f} ms): receive() runs "
                    "inside the step that emitted, so buffer and send in the background.")

    def test_sink_closes_after_receiving(self, sink_host: Any, sinks: list[Any]) -> None:
        events = self._events(sink_host)
        for sink in sinks:
            for event in events:
                sink.receive(event)
            close = getattr(sink, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception as exc:
                contract_failure(f"sink {sink.name!r}: close() raised after receiving "
                                 "events; the host calls it once when it closes.", raised=exc)

    def test_sink_survives_events_emitted_through_a_host(self, sink_host: Any,
                                                         sinks: list[Any]) -> None:
        for event in self._events(sink_host):
            sink_host.emit(event.name, **event.attributes)
        failures = {name: count for name, count in sink_host.telemetry.sink_failures.items()
                    if name in {s.name for s in sinks}}
        require(not failures, f"sinks raised while the host dispatched events: {failures}")


# -- workers ---------------------------------------------------------------------------


class WorkerConformance(_PluginSuite):
    """Checks every worker the plugin registers.

    Contract: ``run(host)`` returns a :class:`~hostcore.types.WorkerResult` whose
    counts are non-negative integers; ``pending=True`` means more work is ready
    now, so runs with no new input drain it in a bounded number of runs and then
    report ``pending=False``; and the worker is resumable: a host restarted over
    the same root (a fresh plugin registration, nothing kept in memory) carries on
    and drains too. Override ``seed_work`` to give the worker a backlog.
    """

    max_runs_to_drain = MAX_RUNS_TO_DRAIN

    @pytest.fixture
    def seed_work(self) -> Callable[[Any], None]:
        """Return a callable that gives the worker(s) in ``host`` a backlog."""
        return lambda host: None

    def _run(self, host: Any, worker: Any) -> WorkerResult:
        check = getattr(worker, "availability", None)
        reason = check() if callable(check) else None
        require(reason is None,
                f"worker {worker.name!r} is unavailable ({reason}), so the host would skip it "
                "and there is nothing to check; give the suite what it needs through "
                "`plugin_config`, `host_env` or `seed_work`.")
        try:
            with host.step_lock():
                result = worker.run(host)
        except Exception as exc:
            contract_failure(f"worker {worker.name!r}: run() raised; the tick would report "
                             "this step failed.", raised=exc)
        require(isinstance(result, WorkerResult),
                f"worker {worker.name!r}: run() returned {type(result).__name__}; it must "
                "return hostcore.types.WorkerResult(pending=..., counts={...}).")
        bad = {k: v for k, v in result.counts.items()
               if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int)
               or v < 0}
        require(not bad, f"worker {worker.name!r}: counts must map names to non-negative "
                         f"integers (never names or paths); got {bad}")
        return result

    def _drain(self, runs: Callable[[], tuple[Any, Any]], hint: str = "") -> int:
        """Run until no worker reports pending; return the runs taken."""
        for attempt in range(1, self.max_runs_to_drain + 1):
            host, workers = runs()
            pending = [w.name for w in workers if self._run(host, w).pending]
            if not pending:
                return attempt
        contract_failure(
            f"worker(s) {pending} still reported pending=True after {self.max_runs_to_drain} "
            "runs with no new input. pending=True must mean more work is ready now, and each "
            f"run must make progress, or the host ticks at the backlog cadence forever.{hint}")

    def test_worker_is_a_valid_registration(self, build_host: Callable[..., Any],
                                            plugin: object) -> None:
        for worker in registered_objects(build_host(), plugin, "worker"):
            try:
                validate(KINDS["worker"], worker, "the worker")
            except Exception as exc:
                contract_failure(str(exc))
            order = getattr(worker, "order", 100)
            require(isinstance(order, int) and not isinstance(order, bool),
                    f"worker {worker.name!r}: order must be an int, got {order!r}")

    def test_run_returns_a_worker_result_of_counts(self, build_host: Callable[..., Any],
                                                   plugin: object, seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        for worker in registered_objects(host, plugin, "worker"):
            self._run(host, worker)

    def test_pending_work_drains_and_then_stays_drained(
            self, build_host: Callable[..., Any], plugin: object, seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        workers = registered_objects(host, plugin, "worker")
        self._drain(lambda: (host, workers))
        for worker in workers:
            require(not self._run(host, worker).pending,
                    f"worker {worker.name!r} reported pending=False, then pending=True on "
                    "the next run with no new input: pending must say whether work is ready.")

    def test_a_restarted_host_resumes_and_drains(self, build_host: Callable[..., Any],
                                                 plugin: object, seed_work: Any) -> None:
        seed_work(build_host())

        def fresh() -> tuple[Any, Any]:
            host = build_host()  # a restart: new host, new registrations, same root
            return host, registered_objects(host, plugin, "worker")

        self._drain(fresh, hint=" Here every run was a restarted host over the same root: "
                                "progress must be kept under the host root, not in memory.")
        host, workers = fresh()
        for worker in workers:
            require(not self._run(host, worker).pending,
                    f"worker {worker.name!r}: after draining, a restarted host found pending "
                    "work again; progress must be kept under the host root, not in memory.")

    def test_worker_runs_as_a_tick_step(self, build_host: Callable[..., Any], plugin: object,
                                        seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        names = {w.name for w in registered_objects(host, plugin, "worker")}
        report = host.tick()
        failed = [s for s in report.steps if s.name in names and not s.ok]
        require(not failed, f"tick steps failed: {[(s.name, s.error) for s in failed]}")


# -- policy inputs ---------------------------------------------------------------------

ODD_DIRECTORIES = ("", "/", "relative/dir", "/päth/with spaces/ünïcode", "/a" * 2000,
                   "/tmp/new\nline", "C:\\Users\\someone")
ODD_SOURCES = ("", "unknown-source", "codex", "claude", "x" * 500)


class PolicyInputConformance(_PluginSuite):
    """Checks every withholding-policy input the plugin registers.

    Contract: ``withholds(directory, source_id)`` returns a ``bool`` for any
    strings, the same answer every time for the same state; ``fingerprint_part()``
    returns ``None`` or a short string that is stable (same state, same part —
    also across a restart), cheap (no row reads), free of paths and names, and
    that changes when the verdicts change (override ``change_policy``).
    """

    fingerprint_budget_seconds = FINGERPRINT_BUDGET_SECONDS
    fingerprint_max_chars = FINGERPRINT_MAX_CHARS

    @pytest.fixture
    def sample_directories(self) -> tuple[str, ...]:
        """Directories the input knows about (e.g. that its config lists)."""
        return ("/home/someone/projects/secret-client", "/srv/work/payroll-service")

    @pytest.fixture
    def change_policy(self) -> Callable[[Any], None] | None:
        """A callable that changes the input's state in ``host`` so a verdict changes,
        or None for an input whose verdicts never change."""
        return None

    @pytest.fixture
    def policy_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def inputs(self, policy_host: Any, plugin: object) -> list[Any]:
        return registered_objects(policy_host, plugin, "policy_input")

    def _part(self, policy_input: Any) -> str | None:
        try:
            part = policy_input.fingerprint_part()
        except Exception as exc:
            contract_failure(f"policy input {policy_input.name!r}: fingerprint_part() raised; "
                             "return None when the input cannot be enumerated cheaply.",
                             raised=exc)
        require(part is None or isinstance(part, str),
                f"policy input {policy_input.name!r}: fingerprint_part() returned "
                f"{type(part).__name__}; it must return a str or None.")
        return part

    def _verdicts(self, policy_input: Any, directories: tuple[str, ...]) -> dict[Any, bool]:
        verdicts = {}
        for directory in (*directories, *ODD_DIRECTORIES):
            for source in ODD_SOURCES:
                try:
                    verdict = policy_input.withholds(directory, source)
                except Exception as exc:
                    contract_failure(
                        f"policy input {policy_input.name!r}: withholds({directory[:60]!r}, "
                        f"{source[:40]!r}) raised; it must answer True or False for any "
                        "directory and source.", raised=exc)
                require(isinstance(verdict, bool),
                        f"policy input {policy_input.name!r}: withholds() returned "
                        f"{type(verdict).__name__}; it must return a bool.")
                verdicts[(directory, source)] = verdict
        return verdicts

    def test_withholds_answers_a_bool_for_any_input(self, inputs: list[Any],
                                                    sample_directories: tuple[str, ...]) -> None:
        for policy_input in inputs:
            first = self._verdicts(policy_input, sample_directories)
            again = self._verdicts(policy_input, sample_directories)
            changed = [key for key in first if first[key] != again[key]]
            require(not changed, f"policy input {policy_input.name!r}: withholds() changed its "
                                 f"answer with no change of state for {changed[:3]}")

    def test_fingerprint_part_is_stable(self, inputs: list[Any]) -> None:
        for policy_input in inputs:
            parts = {self._part(policy_input) for _ in range(3)}
            require(len(parts) == 1, f"policy input {policy_input.name!r}: fingerprint_part() "
                                     f"gave {sorted(map(str, parts))} for one state; it must be "
                                     "stable or every export would look like a policy change.")

    def test_fingerprint_part_survives_a_restart(self, inputs: list[Any], plugin: object,
                                                 build_host: Callable[..., Any]) -> None:
        again = {i.name: i for i in registered_objects(build_host(), plugin, "policy_input")}
        for policy_input in inputs:
            before, after = self._part(policy_input), self._part(again[policy_input.name])
            require(before == after,
                    f"policy input {policy_input.name!r}: fingerprint_part() was {before!r} and "
                    f"{after!r} after a restart with the same state; derive it from the "
                    "input's state only (not object ids, times or random values).")

    def test_fingerprint_part_is_cheap(self, inputs: list[Any]) -> None:
        for policy_input in inputs:
            started = time.perf_counter()
            for _ in range(FINGERPRINT_CALLS):
                self._part(policy_input)
            mean = (time.perf_counter() - started) / FINGERPRINT_CALLS
            require(mean <= self.fingerprint_budget_seconds,
                    f"policy input {policy_input.name!r}: fingerprint_part() took "
                    f"{mean * 1000:.2f} ms (budget {self.fingerprint_budget_seconds * 1000:.0f} "
                    "ms); it is read on every export, so keep a digest of the input's state "
                    "and never read rows. Return None if that is impossible.")

    def test_fingerprint_part_is_a_short_path_free_digest(
            self, inputs: list[Any], sample_directories: tuple[str, ...]) -> None:
        words = {part for d in sample_directories for part in Path(d).parts if len(part) > 3}
        for policy_input in inputs:
            part = self._part(policy_input)
            if part is None:
                continue
            require(len(part) <= self.fingerprint_max_chars,
                    f"policy input {policy_input.name!r}: fingerprint_part() is {len(part)} "
                    f"characters (limit {self.fingerprint_max_chars}); return a digest, not "
                    "the input itself.")
            leaked = sorted(w for w in words | set(sample_directories) if w and w in part)
            require(not leaked, f"policy input {policy_input.name!r}: fingerprint_part() "
                                f"contains {leaked}; it travels with exports and telemetry and "
                                "must never carry a path or a name. Hash them.")

    def test_fingerprint_part_moves_when_verdicts_change(
            self, policy_host: Any, inputs: list[Any],
            change_policy: Callable[[Any], None] | None,
            sample_directories: tuple[str, ...]) -> None:
        before_parts = {i.name: self._part(i) for i in inputs}
        before = {i.name: self._verdicts(i, sample_directories) for i in inputs}
        if change_policy is not None:
            change_policy(policy_host)
        moved_any = False
        for policy_input in inputs:  # the live objects: the seam never re-registers them
            name = policy_input.name
            verdicts = self._verdicts(policy_input, sample_directories)
            part = self._part(policy_input)
            moved = verdicts != before[name]
            moved_any = moved_any or moved
            if moved and part is not None:
                require(part != before_parts[name],
                        f"policy input {name!r}: its verdicts changed but fingerprint_part() "
                        f"stayed {part!r}; consumers would keep exports the new policy "
                        "withholds.")
            if not moved and change_policy is None:
                require(part == before_parts[name],
                        f"policy input {name!r}: fingerprint_part() moved from "
                        f"{before_parts[name]!r} to {part!r} with no change of state.")
        if change_policy is not None:
            require(moved_any, "after change_policy no verdict over the sample directories "
                               "changed; the live input must see its new state (or "
                               "change_policy must change a verdict).")


# -- providers -------------------------------------------------------------------------

# A ref no provider should claim: the kit asks ``owns`` about it.
FOREIGN_REF = "hostcore-conformance:not-yours#0"


class ProviderConformance(_PluginSuite):
    """Checks every work-item provider the plugin registers.

    Contract: ``list_items()`` returns a :class:`~hostcore.workitems.Listing` with
    one :class:`~hostcore.workitems.ScopeListing` per scope; every item of a
    complete scope is owned by the provider (``owns``) and placed in that scope
    (``scope_of``); ``closure(ref)`` of a listed item answers with a
    :class:`~hostcore.workitems.Closure`; when the backend cannot answer, the
    listing says ``failed``/``interrupted``/``degraded`` for every scope it could
    not list (never a shorter list called complete) and ``closure`` raises
    :class:`~hostcore.workitems.ProviderError` — nothing else.

    Fixtures to provide: ``plugin``; ``break_backend`` returning a callable
    ``(host) -> None`` that makes the backend unanswerable (remove the folder,
    point at a dead server); usually ``plugin_config`` and ``seed_items`` (a
    callable ``(host) -> None`` giving the provider at least one open item).
    ``foreign_ref`` defaults to a ref no provider should own.
    """

    @pytest.fixture
    def seed_items(self) -> Callable[[Any], None]:
        """Return a callable that gives the provider(s) in ``host`` open items."""
        return lambda host: None

    @pytest.fixture
    def break_backend(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs a `break_backend` fixture returning a callable "
            "(host) -> None that makes your provider's backend unanswerable, e.g.\n\n"
            "    @pytest.fixture\n    def break_backend(self):\n"
            "        return lambda host: shutil.rmtree(host.root / 'tasks')\n")

    @pytest.fixture
    def foreign_ref(self) -> str:
        return FOREIGN_REF

    @pytest.fixture
    def provider_host(self, build_host: Callable[..., Any], seed_items: Any) -> Any:
        host = build_host()
        seed_items(host)
        return host

    @pytest.fixture
    def providers(self, provider_host: Any, plugin: object) -> list[Any]:
        return registered_objects(provider_host, plugin, "provider")

    def _listing(self, provider: Any) -> Any:
        from hostcore.workitems import Listing, ProviderError, ScopeListing, WorkItem

        try:
            listing = provider.list_items()
        except ProviderError:
            raise
        except Exception as exc:
            contract_failure(f"provider {provider.name!r}: list_items() raised "
                             f"{type(exc).__name__}; report a scope it cannot list as failed "
                             "in the Listing (or raise hostcore.workitems.ProviderError), "
                             "never another exception.", raised=exc)
        require(isinstance(listing, Listing),
                f"provider {provider.name!r}: list_items() returned "
                f"{type(listing).__name__}; it must return hostcore.workitems.Listing("
                "scopes=(ScopeListing(scope=..., status='complete', items=(...)), ...)).")
        for scope in listing.scopes:
            require(isinstance(scope, ScopeListing),
                    f"provider {provider.name!r}: Listing.scopes holds "
                    f"{type(scope).__name__}; each entry must be a ScopeListing.")
            require(scope.status in ("complete", "failed", "interrupted", "degraded"),
                    f"provider {provider.name!r}: scope status {scope.status!r} is not one of "
                    "complete, failed, interrupted, degraded.")
            for item in scope.items:
                require(isinstance(item, WorkItem),
                        f"provider {provider.name!r}: scope {scope.scope!r} lists "
                        f"{type(item).__name__}; items must be hostcore.workitems.WorkItem.")
        names = [scope.scope for scope in listing.scopes]
        require(len(names) == len(set(names)),
                f"provider {provider.name!r}: a scope appears twice in one listing: {names}")
        return listing

    def _listed(self, provider: Any) -> list[tuple[str, Any]]:
        from hostcore.workitems import ProviderError

        try:
            listing = self._listing(provider)
        except ProviderError as exc:
            contract_failure(f"provider {provider.name!r}: list_items() raised ProviderError "
                             "with its backend working.", raised=exc)
        listed = [(scope.scope, item) for scope in listing.scopes
                  if scope.status == "complete" for item in scope.items]
        require(listed, f"provider {provider.name!r}: list_items() gave no item in a complete "
                        "scope, so ownership and closures cannot be checked. Give it open "
                        "items in the `seed_items` fixture (or through `plugin_config`).")
        return listed

    def test_provider_is_a_valid_registration(self, providers: list[Any]) -> None:
        for provider in providers:
            try:
                validate(KINDS["provider"], provider, "the provider")
            except Exception as exc:
                contract_failure(str(exc))

    def test_listed_items_are_owned_and_placed_in_their_scope(
            self, providers: list[Any]) -> None:
        for provider in providers:
            for scope, item in self._listed(provider):
                owned = provider.owns(item.ref)
                require(owned is True,
                        f"provider {provider.name!r}: owns({item.ref.ref!r}) returned "
                        f"{owned!r} for an item it listed; it must return True (a bool).")
                placed = provider.scope_of(item.ref)
                require(placed == scope,
                        f"provider {provider.name!r}: scope_of({item.ref.ref!r}) is "
                        f"{placed!r} but the item was listed in scope {scope!r}; the poller "
                        "decides absence per scope, so the two must agree.")

    def test_a_foreign_ref_is_not_owned(self, providers: list[Any], foreign_ref: str) -> None:
        from hostcore.workitems import WorkItemRef

        for provider in providers:
            try:
                owned = provider.owns(WorkItemRef(foreign_ref))
            except Exception as exc:
                contract_failure(f"provider {provider.name!r}: owns({foreign_ref!r}) raised; "
                                 "return False for a ref that is not yours.", raised=exc)
            require(owned is False, f"provider {provider.name!r}: owns({foreign_ref!r}) "
                                    f"returned {owned!r}; it must be False for a ref of "
                                    "another tracker.")

    def test_closure_of_a_listed_item_says_open(self, providers: list[Any]) -> None:
        from hostcore.workitems import Closure, ProviderError

        for provider in providers:
            for _, item in self._listed(provider):
                try:
                    closure = provider.closure(item.ref)
                except ProviderError as exc:
                    contract_failure(f"provider {provider.name!r}: closure({item.ref.ref!r}) "
                                     "raised ProviderError for an item its working backend "
                                     "just listed as open.", raised=exc)
                except Exception as exc:
                    contract_failure(self._wrong_error(provider, item.ref.ref, exc),
                                     raised=exc)
                require(isinstance(closure, Closure),
                        f"provider {provider.name!r}: closure({item.ref.ref!r}) returned "
                        f"{type(closure).__name__}; it must return hostcore.workitems."
                        "Closure(state='open'|'closed'|'merged', ...).")
                require(closure.state == "open",
                        f"provider {provider.name!r}: closure({item.ref.ref!r}) says "
                        f"{closure.state!r} for an item listed as open.")

    def test_a_broken_backend_fails_the_listing_honestly(
            self, provider_host: Any, providers: list[Any],
            break_backend: Callable[[Any], None]) -> None:
        from hostcore.workitems import ProviderError

        before = {p.name: {s for s, _ in self._listed(p)} for p in providers}
        break_backend(provider_host)
        for provider in providers:
            try:
                listing = self._listing(provider)
            except ProviderError:
                continue
            statuses = {scope.scope: scope.status for scope in listing.scopes}
            lying = sorted(s for s in before[provider.name] if statuses.get(s) == "complete")
            missing = sorted(s for s in before[provider.name] if s not in statuses)
            require(not lying,
                    f"provider {provider.name!r}: with its backend broken, scopes {lying} are "
                    "still reported complete. A scope that could not be listed is failed, "
                    "interrupted or degraded: the poller treats every tracked item missing "
                    "from a complete scope as closed.")
            require(not missing,
                    f"provider {provider.name!r}: with its backend broken, scopes {missing} "
                    "vanished from the listing. Report them as failed so the poller knows "
                    "their items were not seen.")

    def test_an_unanswerable_closure_raises_provider_error(
            self, provider_host: Any, providers: list[Any],
            break_backend: Callable[[Any], None]) -> None:
        from hostcore.workitems import ProviderError

        listed = {p.name: [item.ref for _, item in self._listed(p)] for p in providers}
        break_backend(provider_host)
        for provider in providers:
            for ref in listed[provider.name]:
                try:
                    answer = provider.closure(ref)
                except ProviderError:
                    continue
                except Exception as exc:
                    contract_failure(self._wrong_error(provider, ref.ref, exc), raised=exc)
                contract_failure(
                    f"provider {provider.name!r}: closure({ref.ref!r}) returned {answer!r} "
                    "with its backend broken. When it cannot answer it must raise "
                    "hostcore.workitems.ProviderError, so the poller keeps the item and asks "
                    "again later.")

    @staticmethod
    def _wrong_error(provider: Any, ref: str, exc: BaseException) -> str:
        return (f"provider {provider.name!r}: closure({ref!r}) raised {type(exc).__name__}; "
                "a provider that cannot answer must raise hostcore.workitems.ProviderError "
                "naming the ref (and nothing else), so the poller can tell 'no answer' from "
                "a bug.")


# -- sources ---------------------------------------------------------------------------

# Reads the kit follows a cursor chain for before calling a source endless.
MAX_READS = 1_000


class SourceConformance(_PluginSuite):
    """Checks every evidence source the plugin registers.

    Contract: ``read(cursor)`` returns a :class:`~hostcore.store.SourceBatch` of
    :class:`~hostcore.store.EvidenceRow`; reading on from the cursor it returned
    gives nothing already given (so ingesting the same input twice adds nothing,
    across restarts too); new input after the cursor arrives exactly once; and
    malformed input neither raises nor stops later input from arriving.

    Fixtures to provide: ``plugin``; ``add_evidence`` returning a callable
    ``(host) -> None`` that adds one piece of valid input (an appended line, a new
    file); ``add_malformed`` returning one that adds malformed input (a line that
    is not JSON, a truncated file).
    """

    max_reads = MAX_READS

    @pytest.fixture
    def add_evidence(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs an `add_evidence` fixture returning a callable "
            "(host) -> None that adds one piece of valid input for your source.")

    @pytest.fixture
    def add_malformed(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs an `add_malformed` fixture returning a callable "
            "(host) -> None that adds malformed input for your source.")

    def _read(self, source: Any, cursor: str | None) -> Any:
        from hostcore.store import EvidenceRow, SourceBatch

        try:
            batch = source.read(cursor)
        except Exception as exc:
            contract_failure(f"source {source.name!r}: read({cursor!r}) raised; the host "
                             "would skip this source every tick until its input changes. "
                             "Skip (and count) what you cannot read instead.", raised=exc)
        require(isinstance(batch, SourceBatch),
                f"source {source.name!r}: read() returned {type(batch).__name__}; it must "
                "return hostcore.store.SourceBatch(rows=[EvidenceRow(...)], cursor=...).")
        require(batch.cursor is None or isinstance(batch.cursor, str),
                f"source {source.name!r}: the batch cursor is {type(batch.cursor).__name__}; "
                "it must be a str (or None before any input).")
        wrong = [type(r).__name__ for r in batch.rows if not isinstance(r, EvidenceRow)]
        require(not wrong, f"source {source.name!r}: batch rows include {sorted(set(wrong))}; "
                           "every row must be hostcore.store.EvidenceRow.")
        return batch

    def _drain(self, source: Any, cursor: str | None) -> tuple[list[Any], str | None]:
        rows: list[Any] = []
        for _ in range(self.max_reads):
            batch = self._read(source, cursor)
            rows.extend(batch.rows)
            cursor = batch.cursor
            if not batch.rows and not batch.more:
                return rows, cursor
        contract_failure(f"source {source.name!r} still returned rows after {self.max_reads} "
                         "reads with no new input: read(cursor) must move past what it "
                         "returned.")

    @pytest.fixture
    def source_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def sources(self, source_host: Any, plugin: object) -> list[Any]:
        return registered_objects(source_host, plugin, "source")

    def test_source_is_a_valid_registration(self, sources: list[Any]) -> None:
        for source in sources:
            try:
                validate(KINDS["source"], source, "the source")
            except Exception as exc:
                contract_failure(str(exc))

    def test_reading_on_from_the_returned_cursor_gives_nothing_twice(
            self, source_host: Any, sources: list[Any], add_evidence: Any) -> None:
        add_evidence(source_host)
        add_evidence(source_host)
        for source in sources:
            rows, cursor = self._drain(source, None)
            require(rows, f"source {source.name!r}: add_evidence added input twice but read() "
                          "returned no row; make add_evidence write what the source reads.")
            again = self._read(source, cursor)
            require(not again.rows,
                    f"source {source.name!r}: reading again from the cursor it returned gave "
                    f"{len(again.rows)} row(s) it had already given; the cursor must move "
                    "past every row returned.")

    def test_new_input_after_the_cursor_arrives_once(
            self, source_host: Any, sources: list[Any], add_evidence: Any) -> None:
        add_evidence(source_host)
        cursors = {s.name: self._drain(s, None)[1] for s in sources}
        add_evidence(source_host)
        for source in sources:
            fresh, cursor = self._drain(source, cursors[source.name])
            require(fresh, f"source {source.name!r}: input added after the cursor was not "
                           "returned by read(cursor).")
            require(not self._read(source, cursor).rows,
                    f"source {source.name!r}: the new input was returned twice.")

    def test_ingesting_twice_adds_nothing_even_after_a_restart(
            self, source_host: Any, sources: list[Any], add_evidence: Any,
            build_host: Callable[..., Any]) -> None:
        add_evidence(source_host)
        first = self._tick_rows(source_host)
        require(first > 0, "the ingest step appended no row from input add_evidence added; "
                           "check the source reads where add_evidence writes.")
        require(self._tick_rows(source_host) == 0,
                "a second tick over the same input appended rows again; the source must "
                "return a cursor past every row it returned.")
        require(self._tick_rows(build_host()) == 0,
                "a restarted host over the same root appended rows again; persist progress "
                "only through the cursor you return (the host stores it with the rows).")

    @staticmethod
    def _tick_rows(host: Any) -> int:
        before = sum(v.row_count for v in host.store.partitions().values())
        report = host.tick()
        failed = [(s.name, s.error) for s in report.steps if not s.ok]
        require(not failed, f"tick steps failed: {failed}")
        return sum(v.row_count for v in host.store.partitions().values()) - before

    def test_malformed_input_neither_raises_nor_blocks_later_input(
            self, source_host: Any, sources: list[Any], add_evidence: Any,
            add_malformed: Any) -> None:
        add_evidence(source_host)
        cursors = {s.name: self._drain(s, None)[1] for s in sources}
        add_malformed(source_host)
        add_evidence(source_host)
        for source in sources:
            rows, _ = self._drain(source, cursors[source.name])
            require(rows, f"source {source.name!r}: valid input added after malformed input "
                          "never arrived; skip what is malformed (and say so) and read on.")


# -- destinations ----------------------------------------------------------------------

# The origin (store identity) the kit's hand-made batches claim to come from.
KIT_ORIGIN = "hostcore-conformance-origin"


def export_rows(first: int, last: int) -> list[Any]:
    """Hand-made export rows at positions ``first..last`` (inclusive)."""
    import msgspec

    from hostcore.export import ExportRow

    return [ExportRow(position=p, partition="conformance", source_id="kit", session_id="s",
                      ts="2024-01-01T00:00:00.000000Z", directory="/kit", git_remote="",
                      payload=msgspec.Raw(b'{"n": %d}' % p), key=f"k{p}")
            for p in range(first, last + 1)]


class DestinationConformance(_PluginSuite):
    """Checks every export destination the plugin registers.

    Contract (see ``hostcore.types.Destination``): ``published(stream, origin)``
    reports the last durably held position (``0`` before any push) and the
    identities published, without writing; ``push(batch)`` appends only the rows
    past that position — so a rerun of an overlapping batch holds every row once —
    and returns the ref it now publishes, which ``published`` then agrees with,
    also after a restart; a governance change whose expectation does not match
    what the destination holds raises ``hostcore.ref.Conflict`` and writes
    nothing; the export engine drives it to the end of the feed and a second run
    pushes nothing.

    Fixtures to provide: ``plugin``, usually ``plugin_config``; and
    ``held_positions`` returning a callable ``(host, stream, origin) -> list[int]``
    that reads back the positions the destination holds, in order.
    """

    @pytest.fixture
    def held_positions(self) -> Callable[[Any, str, str], list[int]]:
        contract_failure(
            f"{type(self).__name__} needs a `held_positions` fixture returning a callable "
            "(host, stream, origin) -> list[int] that reads back the row positions your "
            "destination holds, so the suite can check that every row is held once.")

    @pytest.fixture
    def destination_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def destinations(self, destination_host: Any, plugin: object) -> list[Any]:
        found = registered_objects(destination_host, plugin, "destination")
        for destination in found:
            check = getattr(destination, "availability", None)
            reason = check() if callable(check) else None
            require(reason is None,
                    f"destination {destination.name!r} is unavailable ({reason}); give the "
                    "suite what it needs through `plugin_config` or `host_env`.")
        return found

    def _published(self, destination: Any, stream: str, origin: str) -> Any:
        from hostcore.ref import Ref

        try:
            ref = destination.published(stream, origin)
        except Exception as exc:
            contract_failure(f"destination {destination.name!r}: published({stream!r}, "
                             f"{origin!r}) raised; a destination that never received a push "
                             "publishes Ref() (position 0).", raised=exc)
        require(isinstance(ref, Ref),
                f"destination {destination.name!r}: published() returned "
                f"{type(ref).__name__}; it must return a hostcore.ref.Ref.")
        return ref

    def _push(self, destination: Any, batch: Any) -> Any:
        from hostcore.ref import Conflict, Ref

        try:
            ref = destination.push(batch)
        except Conflict:
            raise
        except Exception as exc:
            contract_failure(f"destination {destination.name!r}: push() raised "
                             f"{type(exc).__name__} on a valid batch.", raised=exc)
        require(isinstance(ref, Ref),
                f"destination {destination.name!r}: push() returned {type(ref).__name__}; it "
                "must return the hostcore.ref.Ref it publishes after the push.")
        return ref

    def _batch(self, rows: list[Any], **governance: Any) -> Any:
        from hostcore.export import ExportBatch
        from hostcore.ref import DEFAULT_STREAM

        return ExportBatch(stream=DEFAULT_STREAM, origin=KIT_ORIGIN, rows=rows, **governance)

    def test_destination_is_a_valid_registration(self, destinations: list[Any]) -> None:
        for destination in destinations:
            try:
                validate(KINDS["destination"], destination, "the destination")
            except Exception as exc:
                contract_failure(str(exc))
            key = getattr(destination, "key", None)
            require(key is None or isinstance(key, str),
                    f"destination {destination.name!r}: key must be a str, got {key!r}")

    def test_a_fresh_destination_publishes_position_zero(self, destinations: list[Any]) -> None:
        from hostcore.ref import DEFAULT_STREAM

        for destination in destinations:
            ref = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            require(ref.content == 0,
                    f"destination {destination.name!r}: before any push it publishes position "
                    f"{ref.content}; the export would skip rows 1..{ref.content}.")

    def test_an_overlapping_rerun_holds_every_row_once(
            self, destination_host: Any, destinations: list[Any], plugin: object,
            build_host: Callable[..., Any], held_positions: Any) -> None:
        from hostcore.ref import DEFAULT_STREAM

        for destination in destinations:
            first = self._push(destination, self._batch(export_rows(1, 5)))
            require(first.content == 5,
                    f"destination {destination.name!r}: after pushing positions 1..5, push() "
                    f"returned position {first.content}; it must return the position it now "
                    "holds.")
            again = self._push(destination, self._batch(export_rows(3, 8)))
            require(again.content == 8,
                    f"destination {destination.name!r}: after a rerun pushing 3..8 it "
                    f"returned position {again.content}, not 8.")
            held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
            require(held == list(range(1, 9)),
                    f"destination {destination.name!r}: it holds positions {held} after "
                    "pushes of 1..5 and 3..8; rows at or below its position must be dropped, "
                    "so a rerun after a kill never duplicates one.")
            require(self._published(destination, DEFAULT_STREAM, KIT_ORIGIN).content == 8,
                    f"destination {destination.name!r}: published() disagrees with the "
                    "position push() returned.")
        restarted = {d.name: d for d in registered_objects(build_host(), plugin, "destination")}
        for destination in destinations:
            ref = self._published(restarted[destination.name], DEFAULT_STREAM, KIT_ORIGIN)
            require(ref.content == 8,
                    f"destination {destination.name!r}: after a restart it publishes position "
                    f"{ref.content}, not 8; the position must be the durable truth, since "
                    "the export resumes from it.")

    def test_a_stale_governance_expectation_is_a_conflict_that_writes_nothing(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.ref import DEFAULT_STREAM, Conflict, Ref

        for destination in destinations:
            self._push(destination, self._batch(export_rows(1, 2), sets=Ref(context="c1")))
            before = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            require(before.context == "c1",
                    f"destination {destination.name!r}: a push setting context 'c1' left it "
                    f"publishing context {before.context!r}.")
            stale = self._batch(export_rows(3, 4), sets=Ref(context="c3"),
                                expect=Ref(context="c2"))
            try:
                self._push(destination, stale)
            except Conflict:
                pass
            else:
                contract_failure(
                    f"destination {destination.name!r}: a push expecting context 'c2' while "
                    "it holds 'c1' was accepted. Apply governance with "
                    "hostcore.export.apply_governance before writing, so a moved "
                    "destination refuses it with hostcore.ref.Conflict.")
            after = self._published(destination, DEFAULT_STREAM, KIT_ORIGIN)
            held = held_positions(destination_host, DEFAULT_STREAM, KIT_ORIGIN)
            require(after == before and held == [1, 2],
                    f"destination {destination.name!r}: a refused push still changed it "
                    f"(published {after}, holds {held}); a conflict must write nothing.")

    def test_the_export_engine_reaches_the_end_and_a_rerun_pushes_nothing(
            self, destination_host: Any, destinations: list[Any], held_positions: Any) -> None:
        from hostcore.export import Exporter
        from hostcore.ref import DEFAULT_STREAM
        from hostcore.store import EvidenceRow

        host = destination_host
        host.store.append([EvidenceRow(partition="conformance", source_id="kit",
                                       directory=f"/kit/{n}", payload={"n": n}, key=str(n))
                           for n in range(7)])
        origin = host.store.instance_id
        for destination in destinations:
            first = Exporter(host, destination, batch_rows=3).run()
            require(first.done and first.rows == 7,
                    f"destination {destination.name!r}: the export pushed {first.rows} of 7 "
                    f"rows (done={first.done}).")
            second = Exporter(host, destination, batch_rows=3).run()
            require(second.rows == 0,
                    f"destination {destination.name!r}: a second export pushed "
                    f"{second.rows} rows again; published() must report the position held.")
            held = held_positions(host, DEFAULT_STREAM, origin)
            require(held == sorted(set(held)) and len(held) == 7,
                    f"destination {destination.name!r}: after two exports of 7 rows it holds "
                    f"positions {held}.")
