"""The Host: one embeddable instance of hostcore with its own root, plugins and events.

There is no module-global plugin manager: every :class:`Host` loads its own
plugins into its own pluggy manager, so two hosts in one process never see each
other's plugins, state or events::

    from hostcore import Host

    with Host(root="/tmp/agent-state", plugins=[my_plugin]) as host:
        report = host.tick()

The host holds three things: the typed :class:`~hostcore.plugin.registry.Registry`
of what plugins registered, the services plugins use (the store, the policy and
its seam, the ledger and poller, telemetry, config, state folders), and the tick
loop (:mod:`hostcore.tick`) that runs the workers.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from hostcore import tick as ticks
from hostcore.config import Config, Settings, load_config, parse_settings
from hostcore.errors import ConfigError, PluginLoadError
from hostcore.files import ensure_dir, file_lock
from hostcore.plugin.loader import (
    BUILTIN_PLUGINS,
    PluginInfo,
    PluginSet,
    canonical_name,
    load_plugins,
)
from hostcore.plugin.registration import (
    Destination,
    PolicyInput,
    Provider,
    Registered,
    Source,
    TelemetrySink,
    Worker,
    availability,
)
from hostcore.plugin.registry import Registry
from hostcore.telemetry import AttrValue, Catalog, Event, Telemetry
from hostcore.tick import TickReport

if TYPE_CHECKING:
    from hostcore.evidence.policy import Policy
    from hostcore.evidence.seam import ExportSeam
    from hostcore.evidence.store import Store
    from hostcore.export.freshness import Freshness
    from hostcore.workitems.ledger import Ledger
    from hostcore.workitems.poller import Poller

# The component properties below (store, policy, seam, ledger, poller, freshness) import
# their modules on first use: a Host build and `hostcore plugins` load none of them.
log = logging.getLogger("hostcore.host")

T = TypeVar("T")

ENV_ROOT = "HOSTCORE_ROOT"
STEP_LOCK_FILE = "run.lock"
# Kept for embedders that imported it from here in 0.1.
BACKLOG_INTERVAL_SECONDS = ticks.BACKLOG_INTERVAL_SECONDS
StepReport = ticks.StepReport
# Tables the host and its built-in domains read, whenever they get to them (the
# governance plugin reads its table only when a gate or hook runs, after this check).
_HOST_TABLES = frozenset({"export", "governance"})


def resolve_root(root: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    """``root``, else ``$HOSTCORE_ROOT``, else the platform's user data directory.

    ``HOSTCORE_ROOT`` set to the empty string is refused (:class:`ConfigError`)
    rather than read as unset: a script whose variable came out empty meant some
    root, and silently writing to the default one would mix two roots' evidence.
    """
    if root is None and ENV_ROOT in env:
        if not env[ENV_ROOT]:
            raise ConfigError(f"${ENV_ROOT} is set but empty; set it to a folder, "
                              "or unset it to use the default root")
        root = env[ENV_ROOT]
    if root is None:
        # Third-party; only the default root needs it (a given root or $HOSTCORE_ROOT never does).
        import platformdirs

        root = platformdirs.user_data_dir("hostcore", appauthor=False)
    return Path(root).expanduser().resolve()


def prepare_root(path: Path, *, read_only: bool, user: int | None = None) -> Path:
    """``path`` checked (and created ``0700`` unless ``read_only``) as a state root.

    Raises :class:`ConfigError` (exit 2) naming the root when it cannot be
    created or used, and, the way PostgreSQL checks its data directory, when
    another user could write to it or swap it: the root must belong to ``user``
    (default: the effective user, root included) and be writable by it alone,
    and each existing parent folder must belong to ``user`` or to root and be
    writable by no one else, unless it is sticky (``/tmp``). Whoever can write
    the root can plant a symlink where hostcore writes evidence; whoever can
    write a parent can replace the root with a folder of their own.
    """
    me = os.geteuid() if user is None else user
    # Parents first: a root is never created inside a folder someone else controls.
    _check_parents(path, me)
    try:
        if not read_only:
            ensure_dir(path)
        found = os.lstat(path)
    except FileNotFoundError:
        if read_only:
            return path  # nothing kept yet; a read-only command reports an empty root
        raise ConfigError(f"state root {path}: cannot be created") from None
    except OSError as exc:
        raise ConfigError(f"state root {path}: cannot be used: "
                          f"{exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"state root {path}: is not a folder")
    if found.st_uid != me:
        raise ConfigError(f"state root {path}: belongs to another user (uid {found.st_uid}, "
                          f"not {me}); run hostcore as that user, or use a root of your own "
                          f"(--root or ${ENV_ROOT})")
    if found.st_mode & 0o022:
        raise ConfigError(f"state root {path}: other users can write to it; "
                          f"run `chmod 700 {path}` if it is yours")
    return path


def _check_parents(path: Path, me: int) -> None:
    """Refuse ``path`` when one of its existing parent folders lets a user other than
    ``me`` and root rename or replace what it holds. ``path`` is resolved, so a
    parent that is a symlink now was swapped since: refused too."""
    for parent in path.parents:
        try:
            found = os.lstat(parent)
        except FileNotFoundError:
            continue  # created 0700 by ensure_dir, or never (a read-only command)
        except OSError as exc:
            raise ConfigError(f"state root {path}: its parent folder {parent} cannot be "
                              f"checked: {exc.strerror or type(exc).__name__}") from None
        if not stat.S_ISDIR(found.st_mode):
            # Said here, naming the folder, rather than as the error creating the root.
            raise ConfigError(f"state root {path}: cannot be used: {parent} "
                              "is not a folder")
        if found.st_uid not in (me, 0):
            raise ConfigError(f"state root {path}: its parent folder {parent} belongs to "
                              f"another user (uid {found.st_uid}), who could replace the "
                              "root; use a root whose parent folders are yours or root's")
        if found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX:
            raise ConfigError(f"state root {path}: other users can write to its parent "
                              f"folder {parent} and replace the root; run "
                              f"`chmod go-w {parent}` (or `chmod +t` if it is shared), "
                              "or use another root")


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
    :param plugin_set: an already loaded :class:`~hostcore.plugin.loader.PluginSet`
        to use instead of loading ``plugins`` and entry points (the CLI does this).
    :param read_only: create nothing under the root: the store and ledger are
        opened read-only and :meth:`state_dir` does not create folders. For
        commands that only report.
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
        read_only: bool = False,
    ) -> None:
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.read_only = read_only
        self.root = prepare_root(resolve_root(root, self.env), read_only=read_only)
        self.config = _make_config(config, self.root)
        # What this process is doing, written into the step lock while it holds it,
        # and how long a step waits for another process's (None: as long as it takes).
        self.activity = "hostcore"
        self.lock_wait: float | None = None
        # Called with a short line while a long step makes progress (the CLI sets
        # it when stderr is a terminal); counts only, never names or paths.
        self.progress: Callable[[str], None] | None = None
        # Set by a signal (the CLI) or an embedder: long steps check it and stop early.
        self.stop = threading.Event()
        # The CLI hands over the set it loaded to find plugin commands, so one
        # process loads its plugins once.
        self.plugins: PluginSet = plugin_set or load_plugins(
            BUILTIN_PLUGINS, plugins, load_entrypoints=load_entrypoints, env=self.env
        )
        self.catalog = Catalog()
        self.telemetry = Telemetry(self.catalog)
        self.registry = Registry(self.plugins)
        self._closers: list[Callable[[], None]] = []
        self._closed = False
        self.registry.collect_events(self.catalog)
        self.registry.collect(self)
        # A read-only host reports; it does nothing worth counting, and a sink
        # writing under the root would break the promise to create nothing.
        for sink in () if read_only else self.registry.get("telemetry_sink"):
            self.telemetry.add_sink(sink)
        self._warn_unread_tables()
        counts = {s: 0 for s in ("loaded", "failed", "blocked", "builtin")}
        for info in self.plugins.infos.values():
            counts[info.status] += 1
        self.emit("plugins.loaded", **counts)

    def _warn_unread_tables(self) -> None:
        """Name each ``[plugins.<name>]`` table no plugin can be reading (a typo, or a
        plugin not installed): its settings would otherwise be ignored in silence."""
        known = {canonical_name(n) for n in self.config.read_tables}
        for info in self.plugins.infos.values():
            known.add(canonical_name(info.name))
            known.add(canonical_name(info.name.rsplit(".", 1)[0]))
            if info.distribution:
                known.add(canonical_name(info.distribution))
            known.update(canonical_name(r.name) for r in info.registrations)
        for table in sorted(self.config.settings.plugins):
            if canonical_name(table) not in known | _HOST_TABLES:
                log.warning("config table [plugins.%s] is read by no installed plugin; "
                            "its settings have no effect", table)

    # -- registrations -------------------------------------------------------------

    @overload
    def registered(self, kind: Literal["source"]) -> tuple[Source, ...]: ...
    @overload
    def registered(self, kind: Literal["provider"]) -> tuple[Provider, ...]: ...
    @overload
    def registered(self, kind: Literal["policy_input"]) -> tuple[PolicyInput, ...]: ...
    @overload
    def registered(self, kind: Literal["telemetry_sink"]) -> tuple[TelemetrySink, ...]: ...
    @overload
    def registered(self, kind: Literal["worker"]) -> tuple[Worker, ...]: ...
    @overload
    def registered(self, kind: Literal["destination"]) -> tuple[Destination, ...]: ...
    @overload
    def registered(self, kind: str) -> tuple[Registered, ...]: ...

    def registered(self, kind: str) -> tuple[Registered, ...]:
        """The validated objects of one kind (``"source"``, ``"worker"``, …), typed by
        kind; an unknown kind raises ``KeyError`` naming the kinds there are."""
        return self.registry.get(kind)

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.registry.get("source")

    @property
    def providers(self) -> tuple[Provider, ...]:
        return self.registry.get("provider")

    @property
    def policy_inputs(self) -> tuple[PolicyInput, ...]:
        return self.registry.get("policy_input")

    @property
    def workers(self) -> tuple[Worker, ...]:
        return self.registry.get("worker")

    @property
    def destinations(self) -> tuple[Destination, ...]:
        return self.registry.get("destination")

    @property
    def telemetry_sinks(self) -> tuple[TelemetrySink, ...]:
        return self.registry.get("telemetry_sink")

    @property
    def hook(self) -> Any:
        """The pluggy hook relay, for the event hooks (work items, published refs)."""
        return self.plugins.pm.hook

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin considered, with each registration's current availability."""
        return self.registry.infos()

    # -- services for plugins ------------------------------------------------------

    def emit(self, name: str, /, **attributes: AttrValue) -> Event:
        """Emit a catalogued telemetry event to every sink."""
        return self.telemetry.emit(name, **attributes)

    def plugin_config(self, name: str, type_: type[T]) -> T:
        """A plugin's ``[plugins.<name>]`` table, decoded as ``type_``."""
        return self.config.plugin(name, type_)

    def reload_settings(self) -> Settings:
        """The settings, read again if the config file changed since it was read.

        A long-running loop calls this each cycle, so an edited interval takes
        effect without a restart. A file that no longer parses keeps the
        settings in force and is reported once per change.
        """
        self.config = self.config.reloaded()
        return self.config.settings

    def state_dir(self, name: str) -> Path:
        """A private (``0700``) folder under the root for one plugin's state files.

        On a read-only host the path is returned and nothing is created.
        """
        path = self.root / "plugins" / name
        return path if self.read_only else ensure_dir(path)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the host closes (store connections, open files)."""
        self._closers.append(closer)

    @functools.cached_property
    def store(self) -> Store:
        """The evidence store, ``<root>/store.sqlite3``, opened on first use."""
        from hostcore.evidence.store import STORE_FILE_NAME, Store

        store = Store(self.root / STORE_FILE_NAME, read_only=self.read_only)
        self.on_close(store.close)
        return store

    def store_replaced(self) -> bool:
        """Whether the store this host opened for writing was since replaced or
        removed on disk (see :meth:`Store.replaced`); False before first use."""
        store: Store | None = self.__dict__.get("store")
        return store is not None and store.replaced()

    @functools.cached_property
    def policy(self) -> Policy:
        """The live withholding policy over every registered policy input."""
        from hostcore.evidence.policy import Policy

        return Policy(self.policy_inputs)

    @functools.cached_property
    def seam(self) -> ExportSeam:
        """The export seam: the only way evidence rows leave :attr:`store`."""
        from hostcore.evidence.seam import ExportSeam

        return ExportSeam(self.store, self.policy)

    @functools.cached_property
    def ledger(self) -> Ledger:
        """The work-item ledger, ``<root>/ledger`` (portable records and their index)."""
        from hostcore.workitems.ledger import Ledger
        from hostcore.workitems.summary import LEDGER_DIR

        ledger = Ledger(self.root / LEDGER_DIR, on_event=self.emit, read_only=self.read_only)
        self.on_close(ledger.close)
        return ledger

    @functools.cached_property
    def poller(self) -> Poller:
        """The work-item poller over :attr:`providers` and :attr:`ledger`."""
        from hostcore.workitems.poller import Poller

        return Poller.for_host(self)

    @functools.cached_property
    def freshness(self) -> Freshness:
        """This process's :class:`~hostcore.export.freshness.Freshness` tracker of the
        export stream's observed ref: ``host.freshness.check()`` names the governance
        components that moved since the previous check (nothing on the first)."""
        from hostcore.export.freshness import Freshness

        return Freshness.observing(self.root)

    # -- the tick loop -------------------------------------------------------------

    def tick(self, stop: threading.Event | None = None) -> TickReport:
        """Run every worker once, in order; a stop request skips the remaining steps."""
        return ticks.tick(self, stop)

    def run(self, stop: threading.Event, *, max_ticks: int | None = None,
            backlog_interval: float = ticks.BACKLOG_INTERVAL_SECONDS,
            on_tick: Callable[[TickReport], None] | None = None) -> TickReport | None:
        """Tick until ``stop`` is set; see :func:`hostcore.tick.run`."""
        return ticks.run(self, stop, max_ticks=max_ticks, backlog_interval=backlog_interval,
                         on_tick=on_tick)

    @contextlib.contextmanager
    def step_lock(self, timeout: float | None = None) -> Iterator[None]:
        """Serialise steps across processes sharing this root, one step at a time.

        ``timeout`` (default :attr:`lock_wait`) bounds the wait, after which
        :class:`~hostcore.files.LockBusy` names the holder; ``None`` waits as long
        as it takes. Steps never nest.
        """
        holder = f"pid {os.getpid()} ({self.activity})"
        wait = self.lock_wait if timeout is None else timeout
        with file_lock(self.root / STEP_LOCK_FILE, timeout=wait, holder=holder):
            yield

    # -- reporting -----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What each registered component reports, keyed by kind then name, and the
        last tick this root ran (with its age)."""
        report: dict[str, Any] = {"root": str(self.root), "components": {}}
        for kind, objects in self.registry.items():
            section = {}
            for obj in objects:
                section[obj.name] = _component_status(obj)
            if section:
                report["components"][kind] = section
        last = ticks.load_last(self.root)
        report["last_tick"] = None if last is None else _last_tick(last)
        sources = report["components"].get("source", {})
        for name, counters in ({} if last is None else last.sources).items():
            if name in sources:  # the last tick's, whichever process ran it
                sources[name].update(counters)
        report["telemetry"] = {"sink_failures": dict(self.telemetry.sink_failures)}
        return report

    # -- lifecycle -----------------------------------------------------------------

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


def _component_status(obj: object) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    reason = availability(obj)
    entry["available"] = reason is None
    if reason is not None:
        entry["reason"] = reason
    status = getattr(obj, "status", None)
    if callable(status):
        try:
            entry.update(status())
        except PluginLoadError:
            raise  # a plugin's hook failing in strict mode (hostcore.plugin.calls): fatal
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry


def _last_tick(report: TickReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "age_seconds": max(0, int(time.time() - report.finished_at)),
        "duration_ms": report.duration_ms,
        "pending": report.pending,
        "steps": {s.name: {"ok": s.ok, "skipped": s.skipped, **s.counts,
                           **({"error": s.error} if s.error else {})}
                  for s in report.steps},
    }


def _make_config(config: Any, root: Path) -> Config:
    if config is None or isinstance(config, (str, os.PathLike)):
        return load_config(Path(config) if config is not None else None, root)
    return Config(parse_settings(dict(config), "config mapping"), None)
