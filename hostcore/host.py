"""The Host: one embeddable instance of hostcore with its own root, plugins and events.

There is no module-global plugin manager: every :class:`Host` loads its own
plugins into its own pluggy manager, so two hosts in one process never see each
other's plugins, state or events::

    from hostcore import Host

    with Host(root="/tmp/agent-state", plugins=[my_plugin]) as host:
        report = host.tick()
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from hostcore import types as regtypes
from hostcore.atomic import ensure_dir
from hostcore.builtins import BUILTIN_PLUGINS
from hostcore.config import Config, load_config, parse_settings
from hostcore.errors import ConfigError, RegistrationError
from hostcore.plugins import PluginInfo, PluginSet, Registration, load_plugins
from hostcore.telemetry import AttrValue, Catalog, Event, Telemetry

if TYPE_CHECKING:
    from hostcore.freshness import Freshness
    from hostcore.ledger import Ledger
    from hostcore.policy import Policy
    from hostcore.poller import Poller
    from hostcore.seam import ExportSeam
    from hostcore.store import Store

log = logging.getLogger("hostcore.host")

T = TypeVar("T")

ENV_ROOT = "HOSTCORE_ROOT"
# While a worker reports pending work, the next tick comes this soon (seconds).
BACKLOG_INTERVAL_SECONDS = 5.0


class StepReport(msgspec.Struct):
    """The outcome of one step of a tick (one worker)."""

    name: str
    ok: bool
    pending: bool = False
    skipped: bool = False
    error: str | None = None
    counts: dict[str, int] = msgspec.field(default_factory=dict)


class TickReport(msgspec.Struct):
    """Every step of one tick."""

    steps: list[StepReport]
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    @property
    def pending(self) -> bool:
        return any(step.pending for step in self.steps)

    @property
    def failed(self) -> list[StepReport]:
        return [step for step in self.steps if not step.ok]


def resolve_root(root: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    """``root``, else ``$HOSTCORE_ROOT``, else the platform's user data directory."""
    if root is None:
        root = env.get(ENV_ROOT) or None
    if root is None:
        import platformdirs

        root = platformdirs.user_data_dir("hostcore", appauthor=False)
    return Path(root).expanduser().resolve()


class Host:
    """An isolated hostcore instance.

    :param root: the state root (default ``$HOSTCORE_ROOT`` or the user data dir).
    :param plugins: plugin objects or modules to register, for embedders and tests.
    :param load_entrypoints: also load plugins installed under the ``hostcore``
        entry-point group (subject to ``HOSTCORE_LOAD_PLUGINS`` and
        ``HOSTCORE_DISABLE_PLUGINS``).
    :param config: a path to a TOML file, a mapping, or ``None`` for
        ``<root>/hostcore.toml`` if present, else defaults.
    :param env: the environment to read ``HOSTCORE_*`` variables from.
    :param plugin_set: an already loaded :class:`~hostcore.plugins.PluginSet` to use
        instead of loading ``plugins`` and entry points (the CLI does this).
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        plugins: list[object] | tuple[object, ...] = (),
        load_entrypoints: bool = True,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        plugin_set: PluginSet | None = None,
    ) -> None:
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.root = ensure_dir(resolve_root(root, self.env))
        self.config = _make_config(config, self.root)
        # The CLI hands over the set it loaded to find plugin commands, so one
        # process loads its plugins once.
        self.plugins: PluginSet = plugin_set or load_plugins(
            BUILTIN_PLUGINS, plugins, load_entrypoints=load_entrypoints, env=self.env
        )
        self.catalog = Catalog()
        self.telemetry = Telemetry(self.catalog)
        self._registered: dict[str, list[object]] = {key: [] for key in regtypes.KINDS}
        self._closers: list[Callable[[], None]] = []
        self._closed = False
        self._collect_events()
        self._collect_registrations()
        for sink in self._registered["telemetry_sink"]:
            self.telemetry.add_sink(sink)
        counts = {s: 0 for s in ("loaded", "failed", "blocked", "builtin")}
        for info in self.plugins.infos.values():
            counts[info.status] += 1
        self.emit("plugins.loaded", **counts)

    # -- registration ------------------------------------------------------------

    def _plugin_callers(self, hook_name: str) -> Iterator[tuple[str, Callable[..., Any]]]:
        """Yield (plugin name, a caller of ``hook_name`` limited to that plugin)."""
        pm = self.plugins.pm
        hook = getattr(pm.hook, hook_name)
        everyone = [plugin for _, plugin in pm.list_name_plugin()]
        for impl in hook.get_hookimpls():  # registration order
            others = [p for p in everyone if p is not impl.plugin]
            yield impl.plugin_name, pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _collect_events(self) -> None:
        for plugin_name, call in self._plugin_callers("hostcore_events"):
            try:
                for results in call():
                    for spec in regtypes.as_objects(results):
                        self.catalog.add(spec, owner=self._owner(plugin_name))
            except Exception as exc:
                self._reject(plugin_name, exc)

    def _collect_registrations(self) -> None:
        seen: dict[tuple[str, str], str] = {}
        for kind in regtypes.KINDS.values():
            for plugin_name, call in self._plugin_callers(kind.hook):
                owner = self._owner(plugin_name)
                try:
                    objects = [o for r in call(host=self) for o in regtypes.as_objects(r)]
                    for obj in objects:
                        regtypes.validate(kind, obj, owner)
                        key = (kind.key, obj.name)  # type: ignore[attr-defined]
                        if key in seen:
                            raise RegistrationError(
                                f"{kind.key} name {obj.name!r} from {owner} is already "  # type: ignore[attr-defined]
                                f"registered by {seen[key]}"
                            )
                except ConfigError:
                    raise  # a user's config mistake: exit 2, not a plugin failure
                except Exception as exc:
                    self._reject(plugin_name, exc)
                    continue
                info = self.plugins.infos[plugin_name]
                for obj in objects:
                    seen[(kind.key, obj.name)] = owner  # type: ignore[attr-defined]
                    self._registered[kind.key].append(obj)
                    info.registrations.append(_registration(kind.key, obj))
        self._registered["worker"].sort(key=lambda w: getattr(w, "order", 100))

    def _owner(self, plugin_name: str) -> str:
        info = self.plugins.infos.get(plugin_name)
        if info and info.distribution:
            return f"plugin {plugin_name!r} ({info.distribution})"
        return f"plugin {plugin_name!r}"

    def _reject(self, plugin_name: str, exc: Exception) -> None:
        import traceback

        info = self.plugins.infos[plugin_name]
        if info.status == "builtin":
            raise exc
        # Drop everything the plugin registered so far: half a plugin is worse than none.
        for kind_key, objects in self._registered.items():
            mine = {r.name for r in info.registrations if r.kind == kind_key}
            objects[:] = [o for o in objects if getattr(o, "name", None) not in mine]
        self.plugins.fail(info, f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def registered(self, kind: str) -> tuple[Any, ...]:
        """The validated objects of one kind (``"source"``, ``"worker"``, …)."""
        return tuple(self._registered[kind])

    @property
    def sources(self) -> tuple[Any, ...]:
        return self.registered("source")

    @property
    def providers(self) -> tuple[Any, ...]:
        return self.registered("provider")

    @property
    def policy_inputs(self) -> tuple[Any, ...]:
        return self.registered("policy_input")

    @property
    def workers(self) -> tuple[Any, ...]:
        return self.registered("worker")

    @property
    def destinations(self) -> tuple[Any, ...]:
        return self.registered("destination")

    @property
    def hook(self) -> Any:
        """The pluggy hook relay, for the event hooks (work items, published refs)."""
        return self.plugins.pm.hook

    def plugin_infos(self) -> list[PluginInfo]:
        for info in self.plugins.infos.values():
            for reg in info.registrations:
                obj = self._find(reg.kind, reg.name)
                reason = regtypes.availability(obj)
                reg.available, reg.reason = reason is None, reason
        return list(self.plugins.infos.values())

    def _find(self, kind: str, name: str) -> Any:
        return next((o for o in self._registered[kind] if o.name == name), None)

    # -- services for plugins ----------------------------------------------------

    def emit(self, name: str, /, **attributes: AttrValue) -> Event:
        """Emit a catalogued telemetry event to every sink."""
        return self.telemetry.emit(name, **attributes)

    def plugin_config(self, name: str, type_: type[T]) -> T:
        """A plugin's ``[plugins.<name>]`` table, decoded as ``type_``."""
        return self.config.plugin(name, type_)

    def state_dir(self, name: str) -> Path:
        """A private folder under the root for one plugin's state files."""
        return ensure_dir(self.root / "plugins" / name)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the host closes (store connections, open files)."""
        self._closers.append(closer)

    @functools.cached_property
    def store(self) -> Store:
        """The evidence store, ``<root>/store.sqlite3``, opened on first use."""
        from hostcore.store import STORE_FILE_NAME, Store

        store = Store(self.root / STORE_FILE_NAME)
        self.on_close(store.close)
        return store

    @functools.cached_property
    def policy(self) -> Policy:
        """The live withholding policy over every registered policy input."""
        from hostcore.policy import Policy

        return Policy(self.policy_inputs)

    @functools.cached_property
    def seam(self) -> ExportSeam:
        """The export seam: the only way evidence rows leave :attr:`store`."""
        from hostcore.seam import ExportSeam

        return ExportSeam(self.store, self.policy)

    @functools.cached_property
    def ledger(self) -> Ledger:
        """The work-item ledger, ``<root>/ledger`` (portable records and their index)."""
        from hostcore.ledger import Ledger

        ledger = Ledger(self.root / "ledger", on_event=self.emit)
        self.on_close(ledger.close)
        return ledger

    @functools.cached_property
    def poller(self) -> Poller:
        """The work-item poller over :attr:`providers` and :attr:`ledger`."""
        from hostcore.poller import Poller

        return Poller.for_host(self)

    @functools.cached_property
    def freshness(self) -> Freshness:
        """This process's :class:`~hostcore.freshness.Freshness` tracker of the export
        stream's observed ref: ``host.freshness.check()`` names the governance
        components that moved since the previous check (nothing on the first)."""
        from hostcore.freshness import Freshness

        return Freshness.observing(self.root)

    # -- the tick loop -----------------------------------------------------------

    def tick(self, stop: threading.Event | None = None) -> TickReport:
        """Run every worker once, in order; a stop request skips the remaining steps."""
        started = time.monotonic()
        steps: list[StepReport] = []
        for worker in self.workers:
            if stop is not None and stop.is_set():
                steps.append(StepReport(name=worker.name, ok=True, skipped=True))
                continue
            steps.append(self._run_step(worker))
        report = TickReport(steps=steps, duration_ms=int((time.monotonic() - started) * 1000))
        self.emit(
            "tick.completed",
            steps=sum(not s.skipped for s in steps),
            failed=len(report.failed),
            skipped=sum(s.skipped for s in steps),
            pending=report.pending,
            duration_ms=report.duration_ms,
        )
        return report

    def _run_step(self, worker: Any) -> StepReport:
        reason = regtypes.availability(worker)
        if reason is not None:
            return StepReport(name=worker.name, ok=True, skipped=True)
        try:
            with self.step_lock():
                result = worker.run(self)
        except Exception as exc:
            # Log the kind of failure only: messages can carry paths or names.
            log.warning("step %r failed: %s", worker.name, type(exc).__name__)
            log.debug("step %r failed", worker.name, exc_info=True)
            return StepReport(name=worker.name, ok=False, error=f"{type(exc).__name__}: {exc}")
        if not isinstance(result, regtypes.WorkerResult):
            return StepReport(name=worker.name, ok=False,
                              error=f"returned {type(result).__name__}, not WorkerResult")
        return StepReport(name=worker.name, ok=True, pending=result.pending,
                          counts=dict(result.counts))

    @contextlib.contextmanager
    def step_lock(self) -> Iterator[None]:
        """Serialise steps across processes sharing this root, one step at a time.

        Reentrant within a process is not needed: steps never nest.
        """
        fd = os.open(self.root / "run.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the flock

    def run(self, stop: threading.Event, *, max_ticks: int | None = None,
            backlog_interval: float = BACKLOG_INTERVAL_SECONDS) -> TickReport | None:
        """Tick until ``stop`` is set: every ``[run] interval_seconds``, or every
        ``backlog_interval`` seconds while a worker reports pending work. Returns the
        last report."""
        report = None
        ticks = 0
        while not stop.is_set():
            report = self.tick(stop)
            ticks += 1
            if max_ticks is not None and ticks >= max_ticks:
                break
            interval = self.config.settings.run.interval_seconds
            stop.wait(min(interval, backlog_interval) if report.pending else interval)
        return report

    # -- reporting ---------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What each registered component reports, keyed by kind then name."""
        report: dict[str, Any] = {"root": str(self.root), "components": {}}
        for kind, objects in self._registered.items():
            section = {}
            for obj in objects:
                entry: dict[str, Any] = {}
                reason = regtypes.availability(obj)
                entry["available"] = reason is None
                if reason is not None:
                    entry["reason"] = reason
                status = getattr(obj, "status", None)
                if callable(status):
                    try:
                        entry.update(status())
                    except Exception as exc:
                        entry["error"] = f"{type(exc).__name__}: {exc}"
                section[obj.name] = entry
            if section:
                report["components"][kind] = section
        report["telemetry"] = {"sink_failures": dict(self.telemetry.sink_failures)}
        return report

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:
                log.warning("a close step failed", exc_info=True)
        self.telemetry.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _make_config(config: Any, root: Path) -> Config:
    if config is None or isinstance(config, (str, os.PathLike)):
        return load_config(Path(config) if config is not None else None, root)
    return Config(parse_settings(dict(config), "config mapping"), None)


def _registration(kind: str, obj: Any) -> Registration:
    return Registration(kind=kind, name=obj.name)
