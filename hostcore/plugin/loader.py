"""Plugin discovery and loading, owned by the host rather than left to pluggy.

A plugin whose import raises, whose hookimpls do not match a hookspec, or that
names an unknown hook is reported (plugin, distribution, version, error) and
skipped: one broken plugin never bricks the host or its CLI. Set
``HOSTCORE_STRICT_PLUGINS=1`` to make that a hard error while developing a plugin.

Which entry-point plugins load is the user's choice:

* ``HOSTCORE_LOAD_PLUGINS`` — comma-separated plugin names to allow; set but
  empty means no external plugin at all.
* ``HOSTCORE_DISABLE_PLUGINS`` — comma-separated plugin names to block.

A plugin may be named by its distribution (``hostcore-gh``) or its entry point
(``gh``), case and ``-``/``_``/``.`` aside. A name that matches no installed
plugin is reported on stderr, naming it.

Built-in plugins (the host's own hookimpls) always load and cannot be disabled.

An entry point's name is its plugin's name everywhere (the listing, ``[plugins.<name>]``,
the allow and block lists), so it is checked before anything is imported: an empty
name, one an earlier plugin holds (PEP 503 spelling aside) or a built-in's (see
:func:`reserved_names`) is reported by name and skipped.

A plugin states the hostcore versions it supports in its distribution's dependency
on ``hostcore`` (``Requires-Dist: hostcore>=0.2,<0.3``). Before importing an
entry-point plugin the loader checks that range against the running host, and fails
a plugin built for another host version with a message naming both ("built for
hostcore >=0.2,<0.3; this is 0.4.0") rather than letting it break later in a
confusing way. Each distribution's metadata is read once, and the range is only
evaluated for plugins that are going to be loaded.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
import traceback
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import msgspec
import pluggy

from hostcore import HOOK_API_VERSION, __version__
from hostcore.errors import PluginLoadError
from hostcore.plugin import hookspecs
from hostcore.plugin.discovery import FoundEntryPoint, entry_points
from hostcore.plugin.markers import ENTRY_POINT_GROUP, PROJECT_NAME

log = logging.getLogger("hostcore.plugin.loader")

Status = Literal["builtin", "loaded", "failed", "blocked"]

ENV_ALLOW = "HOSTCORE_LOAD_PLUGINS"
ENV_BLOCK = "HOSTCORE_DISABLE_PLUGINS"
ENV_STRICT = "HOSTCORE_STRICT_PLUGINS"

# The host's own plugins, in load order: each domain's built-in beside its engine.
# They register through the same hooks as third parties and cannot be disabled.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "hostcore.plugin.core",
    "hostcore.evidence.plugin",
    "hostcore.export.plugin",
    "hostcore.workitems.plugin",
    "hostcore.scaffold.plugin",
    "hostcore.agents.plugin",
    "hostcore.governance.plugin",
)

_HOOK_NAMES = frozenset(n for n in dir(hookspecs) if n.startswith("hostcore_"))
_IMPL_ATTRIBUTE = f"{PROJECT_NAME}_impl"  # where a hookimpl marker keeps its options
# What a module's own type holds as data descriptors: pluggy finds these, not the
# module's entry of the same name.
_MODULE_TYPE_DESCRIPTORS = frozenset(
    n for n, v in vars(types.ModuleType).items() if hasattr(v, "__set__"))
_ABSENT = object()

if TYPE_CHECKING:
    from pluggy._hooks import HookimplOpts


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, reading a module plugin's attributes from its ``__dict__``.

    pluggy looks up every name ``dir(plugin)`` lists with ``inspect.getattr_static``,
    which walks the type's MRO for each: about 500 names across the built-ins and
    the installed plugins, 2-3 ms of every command's start. For a plain module the
    answer is its ``__dict__`` entry, so a plain function (or anything that is no
    method wrapper) is judged from that; every other case is left to pluggy.
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> HookimplOpts | None:
        if type(plugin) is types.ModuleType and name not in _MODULE_TYPE_DESCRIPTORS:
            value = plugin.__dict__.get(name, _ABSENT)
            if inspect.isfunction(value):
                opts = getattr(value, _IMPL_ATTRIBUTE, None)
                return cast("HookimplOpts", opts) if isinstance(opts, dict) else None
            if value is not _ABSENT and not isinstance(
                    value, staticmethod | classmethod | types.MethodType):
                return None  # no function: pluggy would find no hook here either
        return super().parse_hookimpl_opts(plugin, name)


class Registration(msgspec.Struct):
    """One object a plugin registered: its kind, name and whether it is usable."""

    kind: str
    name: str
    available: bool = True
    reason: str | None = None


class PluginInfo(msgspec.Struct):
    """What ``hostcore plugins --json`` reports for one plugin (stable keys).

    ``requires_hostcore`` is the range of host versions the plugin's distribution
    states (``None`` when it states none, or when the plugin was blocked and so not
    looked at); ``hook_api`` is the host's ``HOOK_API_VERSION``, on built-ins only.
    """

    name: str
    distribution: str | None
    version: str | None
    status: Status
    hooks: list[str] = msgspec.field(default_factory=list)
    registrations: list[Registration] = msgspec.field(default_factory=list)
    error: str | None = None
    traceback: str | None = None
    requires_hostcore: str | None = None
    hook_api: int | None = None


class PluginSet:
    """A pluggy manager with the host's record of every plugin it considered."""

    def __init__(self, *, strict: bool) -> None:
        self.pm = _PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.strict = strict
        self.infos: dict[str, PluginInfo] = {}
        self._objects: dict[str, object] = {}
        # Called with a plugin's info as it fails, before its registrations are
        # forgotten: a plugin can fail after the registry took its objects.
        self.on_fail: list[Callable[[PluginInfo], None]] = []

    def register(self, obj: object, info: PluginInfo) -> bool:
        """Register ``obj``; on a validation error record it (or raise if strict)."""
        if info.name in self.infos:
            other = self.infos[info.name]
            return self.fail(info, f"plugin name {info.name!r} from {_origin(info)} is "
                                   f"already used by {_origin(other)}")
        try:
            unknown = sorted(_unknown_hooks(obj))
            if unknown:
                raise PluginLoadError(f"unknown hook(s): {', '.join(unknown)}")
            self.pm.register(obj, name=info.name)
        except Exception as exc:
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            return self.fail(info, one_line(exc), traceback.format_exc())
        info.hooks = sorted(h.name for h in self.pm.get_hookcallers(obj) or ())
        self.infos[info.name] = info
        self._objects[info.name] = obj
        return True

    def fail(self, info: PluginInfo, error: str, tb: str | None = None) -> bool:
        """Mark ``info`` failed, dropping its hooks; raise instead when strict."""
        # Only the plugin that owns the name is unregistered: a second plugin
        # claiming a taken name fails alone and is listed under a key of its own.
        if self.infos.get(info.name) is info:
            obj = self._objects.pop(info.name, None)
            if obj is not None and self.pm.is_registered(obj):
                self.pm.unregister(obj)
        for listener in self.on_fail:
            listener(info)
        info.status = "failed"
        info.error = error
        info.traceback = tb
        info.hooks = []
        info.registrations = []
        self._record(info)
        where = f" ({info.distribution} {info.version})" if info.distribution else ""
        if self.strict:
            raise PluginLoadError(f"plugin {info.name!r}{where} failed: {error}")
        log.warning("plugin %r%s failed and was skipped: %s", info.name, where, error)
        if tb:
            log.debug("%s", tb)
        return False

    def _record(self, info: PluginInfo) -> None:
        """Keep ``info`` listed, under its name unless another plugin holds it."""
        key, n = info.name, 1
        while self.infos.get(key, info) is not info:
            n += 1
            key = f"{info.name}#{n}"
        self.infos[key] = info

    def plugin_object(self, name: str) -> Any:
        """The plugin object registered under ``name`` (``None`` when none is)."""
        return self._objects.get(name)

    def plugin_name(self, obj: object) -> str:
        return self.pm.get_name(obj) or repr(obj)


def load_plugins(
    builtins: Iterable[str],
    extra: Iterable[object],
    *,
    load_entrypoints: bool,
    env: Mapping[str, str],
    found: Sequence[FoundEntryPoint] | None = None,
) -> PluginSet:
    """Build a :class:`PluginSet`: built-ins, then ``extra`` objects, then entry points:
    those on ``sys.path``, or ``found`` (what a caller read off ``sys.path`` before, as
    the agent hook's plugin index keeps it: no metadata file is read again)."""
    plugins = PluginSet(strict=env.get(ENV_STRICT, "").lower() in ("1", "true", "yes"))
    for module_name in builtins:
        module = importlib.import_module(module_name)
        # A broken built-in is hostcore's own bug: never swallow it.
        plugins.pm.register(module, name=module_name)
        info = PluginInfo(name=module_name, distribution="hostcore", version=__version__,
                          status="builtin", hook_api=HOOK_API_VERSION)
        info.hooks = sorted(h.name for h in plugins.pm.get_hookcallers(module) or ())
        plugins.infos[module_name] = info
        plugins._objects[module_name] = module
    for obj in extra:
        name = getattr(obj, "__name__", None) or type(obj).__name__
        plugins.register(obj, PluginInfo(name=name, distribution=None, version=None,
                                         status="loaded"))
    if load_entrypoints:
        _load_entry_points(plugins, env, found)
    _check_pending(plugins)
    return plugins


def _check_pending(plugins: PluginSet) -> None:
    """Fail each plugin that implements a hook no spec defines (e.g. via ``specname``)."""
    while True:
        try:
            plugins.pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = plugins.pm.get_name(exc.plugin)
            info = plugins.infos.get(name) if name else None
            if info is None or info.status == "builtin":
                raise
            plugins.fail(info, one_line(exc))


def _load_entry_points(plugins: PluginSet, env: Mapping[str, str],
                       found: Sequence[FoundEntryPoint] | None = None) -> None:
    allow = _name_set(env[ENV_ALLOW]) if ENV_ALLOW in env else None
    block = _name_set(env.get(ENV_BLOCK, ""))
    chosen = (allow or set()) | block
    matched: set[str] = set()
    seen: set[tuple[str, str]] = set()
    taken = {canonical_name(name): _origin(info) for name, info in plugins.infos.items()}
    for ep in entry_points(ENTRY_POINT_GROUP) if found is None else found:
        dist_name, version, requires = ep.dist
        if (dist_name, ep.name) in seen:  # the same dist on sys.path twice
            continue
        seen.add((dist_name, ep.name))
        info = PluginInfo(name=ep.name, distribution=dist_name, version=version,
                          status="loaded")
        # Before import and before the allow and block lists: a plugin's name keys
        # its listing, its config table and those lists, so it must be its own.
        problem = entry_name_problem(ep.name, dist_name, taken)
        if problem:
            plugins.fail(info, f"PluginLoadError: {problem}")
            continue
        taken[canonical_name(ep.name)] = dist_name
        # A plugin is named by its distribution or by its entry point, whichever
        # the user read off a listing (`plugins` shows both).
        names = {canonical_name(dist_name), canonical_name(ep.name)}
        matched |= names & chosen
        if (allow is not None and not names & allow) or names & block:
            info.status = "blocked"
            plugins._record(info)
            continue
        info.requires_hostcore, refusal = host_range_check(requires, __version__)
        if refusal:
            # Refused before import: code built for another host may fail at import,
            # or worse, later, with an error that does not say why.
            plugins.fail(info, f"PluginLoadError: {refusal}")
            continue
        try:
            obj = ep.load()
        except Exception as exc:
            plugins.fail(info, one_line(exc), traceback.format_exc())
            continue
        plugins.register(obj, info)
    for variable, named in ((ENV_ALLOW, allow or set()), (ENV_BLOCK, block)):
        for name in sorted(named - matched):
            log.warning("%s names %r, which is no installed plugin (neither a distribution "
                        "nor an entry point name); `hostcore plugins` lists them", variable,
                        name)


# Cached: every entry point is checked against it, and each call normalises every
# built-in's names again (a regular expression per name, hundreds per hook run).
@functools.cache
def reserved_names(builtins: tuple[str, ...] = BUILTIN_PLUGINS) -> frozenset[str]:
    """Names no entry point may take (canonical): the project's, each built-in's
    and each built-in's package (``export`` reads ``[plugins.export]``)."""
    names = {PROJECT_NAME}
    for module in builtins:
        names.add(canonical_name(module))
        names.add(canonical_name(module.split(".")[1]))
    return frozenset(names)


def entry_name_problem(name: str, dist_name: str, taken: Mapping[str, str]) -> str | None:
    """Why entry point ``name`` of ``dist_name`` cannot name a plugin, or ``None``.

    ``taken`` maps each name already in use (canonical) to who uses it.
    """
    if not name.strip():
        return (f"{dist_name} declares a hostcore entry point with an empty name (the "
                "name before '=' in its entry_points.txt)")
    key = canonical_name(name)
    if key in reserved_names():
        return f"entry point {name!r} of {dist_name} takes the name of a hostcore built-in"
    if key in taken:
        return (f"entry point {name!r} of {dist_name} takes a plugin name {taken[key]} "
                "already uses")
    return None


# How a stated range's clauses are shown: lower bounds first, as people write them
# (">=0.2,<0.3"), whatever order the build backend stored them in.
_CLAUSE_ORDER = {">=": 0, ">": 0, "~=": 0, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}

# One clause of a range: operator, version as written, and whether it admits the host.
Verdict = tuple[str, str, bool]


def host_range_check(requires: Iterable[str], host_version: str
                     ) -> tuple[str | None, str | None]:
    """The hostcore range ``requires`` states, and why it refuses ``host_version``.

    Returns ``(stated, refusal)``. ``stated`` joins the clauses of every
    requirement on ``hostcore`` that applies here (environment markers evaluated,
    extras left out), or is ``None`` when none states a range. ``refusal`` is
    ``None`` when ``host_version`` is in that range, else the sentence to report.
    A requirement that cannot be parsed states nothing: a plugin is loaded rather
    than refused on doubt. A pre-release host counts as in range, so a
    development build loads the plugins it is developed with.
    """
    lines = [r for r in requires if canonical_name(_requirement_name(r)) == PROJECT_NAME]
    if not lines:
        return None, None
    verdicts = _plain_verdicts(lines, host_version)
    if verdicts is None:
        verdicts = _packaging_verdicts(lines, host_version)
    if not verdicts:
        return None, None
    verdicts.sort(key=lambda v: _CLAUSE_ORDER.get(v[0], 1))
    stated = ",".join(operator + version for operator, version, _ in verdicts)
    if all(admits for _, _, admits in verdicts):
        return stated, None
    return stated, f"built for hostcore {stated}; this is {host_version}"


# Two-character operators first: ">=1" is not ">" and "=1".
_OPERATORS = (">=", "<=", "==", "!=", "<", ">")
_COMPARE = {">=": tuple.__ge__, "<=": tuple.__le__, "==": tuple.__eq__,
            "!=": tuple.__ne__, "<": tuple.__lt__, ">": tuple.__gt__}


def _plain_verdicts(lines: list[str], host_version: str) -> list[Verdict] | None:
    """The verdicts, without ``packaging``, when every line and the host are plain.

    Plain is what build backends write for a range of releases: ``hostcore`` and
    comparisons with release numbers (``hostcore<0.3,>=0.2``), no marker, extra,
    wildcard or pre-release, and a host version of release numbers. Between
    releases PEP 440 compares the numbers, padded with zeros. Anything else
    returns ``None`` and is left to ``packaging``, whose import would cost every
    cold start with a plugin more than the whole check does here.
    """
    if not _is_release(host_version):
        return None
    host = _release(host_version)
    verdicts: list[Verdict] = []
    for line in lines:
        clauses = _plain_clauses(line)
        if clauses is None:
            return None
        for operator, version in clauses:
            bound = _release(version)
            width = max(len(bound), len(host))
            admits = _COMPARE[operator](host + (0,) * (width - len(host)),
                                        bound + (0,) * (width - len(bound)))
            verdicts.append((operator, version, admits))
    return verdicts


def _plain_clauses(line: str) -> list[tuple[str, str]] | None:
    """The ``(operator, release)`` clauses of ``hostcore>=0.2,<0.3`` (none for a bare
    ``hostcore``); ``None`` when the line says anything else. Parsed by hand: the
    regular expressions for it cost more to compile than a start spends here."""
    text = line.strip()
    if text[:len(PROJECT_NAME)].lower() != PROJECT_NAME:
        return None
    rest = text[len(PROJECT_NAME):].strip()
    if not rest:
        return []
    clauses = []
    for clause in rest.split(","):
        clause = clause.strip()
        operator = next((o for o in _OPERATORS if clause.startswith(o)), None)
        if operator is None:
            return None
        release = clause[len(operator):].strip()
        if not _is_release(release):
            return None
        clauses.append((operator, release))
    return clauses


def _is_release(text: str) -> bool:
    """Whether ``text`` is release numbers only (``0.2.1``)."""
    return all(part.isascii() and part.isdigit() for part in text.split("."))


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.split("."))


def _packaging_verdicts(lines: list[str], host_version: str) -> list[Verdict]:
    """The verdicts for any PEP 508 requirement lines, through ``packaging``."""
    # Imported here, not at the top: only a plugin being loaded that states an
    # unusual range pays for it.
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import Specifier
    from packaging.version import InvalidVersion, Version

    clauses: list[Specifier] = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            clauses.extend(requirement.specifier)
    try:
        version: Version | None = Version(host_version)
    except InvalidVersion:
        version = None  # an unknown host refuses nothing
    return [(c.operator, c.version,
             version is None or c.contains(version, prereleases=True)) for c in clauses]


def _requirement_name(line: str) -> str:
    """The project name a requirement line starts with (PEP 508), before parsing it."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return match.group(1) if match else ""


@functools.cache  # called for each plugin's names at every load: one substitution each
def canonical_name(name: str) -> str:
    """PEP 503 normalisation, so ``Hostcore_GH`` and ``hostcore-gh`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name_set(value: str) -> set[str]:
    return {canonical_name(part.strip()) for part in value.split(",") if part.strip()}


def _unknown_hooks(obj: object) -> set[str]:
    names = {n for n in dir(obj) if n.startswith("hostcore_") and callable(getattr(obj, n))}
    return names - _HOOK_NAMES


def one_line(exc: BaseException) -> str:
    # pluggy puts the offending argument names on later lines: keep them all.
    text = "; ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _origin(info: PluginInfo) -> str:
    return info.distribution or "a plugin object"

