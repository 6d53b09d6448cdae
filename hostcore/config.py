"""Typed configuration: an optional ``hostcore.toml`` decoded with msgspec.

No file means working defaults. A bad key or value raises
:class:`~hostcore.errors.ConfigError` naming the file and the key. Each plugin
reads its own ``[plugins.<name>]`` table through :meth:`Config.plugin`, typed by
a Struct the plugin defines, so its errors read the same way.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from hostcore.config_tables import CONFIG_FILE_NAME, find_table, two_spellings
from hostcore.errors import ConfigError

log = logging.getLogger("hostcore.config")


T = TypeVar("T")
# A day is the longest interval that makes sense for a tick or a poll; an
# unbounded float (inf, 1e300) would crash the wait after the first tick.
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
WaitSeconds = Annotated[float, msgspec.Meta(ge=0, le=86_400)]


class RunSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[run]``: the tick loop of ``hostcore run``."""

    interval_seconds: PositiveSeconds = 60.0
    # How long `run --once` keeps ticking while a worker reports pending work.
    drain_seconds: WaitSeconds = 60.0
    # How long a command waits for another process's step before giving up.
    lock_wait_seconds: WaitSeconds = 10.0


class PollSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[poll]``: the work-item poller."""

    interval_seconds: PositiveSeconds = 60.0
    # How long one poll cycle may spend asking providers; what is left waits for the
    # next cycle. Well under the default interval, so a hung tracker cannot stall it.
    cycle_budget_seconds: PositiveSeconds = 40.0


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole configuration file."""

    run: RunSettings = msgspec.field(default_factory=RunSettings)
    poll: PollSettings = msgspec.field(default_factory=PollSettings)
    plugins: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


class Config:
    """The effective configuration, and where it came from."""

    def __init__(self, settings: Settings, source: Path | None, *,
                 watch: Path | None = None) -> None:
        self.settings = settings
        self.source = source
        # The file whose edits reloaded() picks up: the one read, or the default
        # one that did not exist yet.
        self.watch = watch or source
        self._stamp = _stamp(self.watch)
        #: The ``[plugins.<name>]`` tables some plugin asked for (see :meth:`plugin`).
        self.read_tables: set[str] = set()

    def reloaded(self) -> Config:
        """This config, or a fresh read of its file if the file changed since.

        A file that no longer reads or parses keeps this config (logged once
        per change): a running loop must not die of a half-saved edit.
        """
        if self.watch is None:
            return self
        stamp = _stamp(self.watch)
        if stamp == self._stamp:
            return self
        try:
            fresh = (load_config(self.watch, self.watch.parent) if stamp is not None
                     else Config(Settings(), None, watch=self.watch))
        except ConfigError as exc:
            log.warning("config changed but cannot be used; keeping the old one: %s", exc)
            self._stamp = stamp
            return self
        fresh.read_tables = self.read_tables
        return fresh

    @property
    def origin(self) -> str:
        return str(self.source) if self.source else "(defaults: no config file)"

    def plugin(self, name: str, type_: type[T]) -> T:
        """Decode the ``[plugins.<name>]`` table as ``type_`` (defaults if absent).

        The table is found under any spelling of ``name`` that
        :func:`~hostcore.config_tables.table_name` makes the same
        (``[plugins.claude_code]`` for ``claude-code``), the way the entry-point and
        distribution names it stands for are matched.
        """
        self.read_tables.add(name)
        spelled, table = find_table(self.settings.plugins, name) or (name, {})
        try:
            return msgspec.convert(table, type=type_)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"{self.origin}: [plugins.{spelled}]: "
                              f"{describe_error(exc)}") from None

    def to_builtins(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self.settings)
        return data


def load_config(path: Path | None, root: Path) -> Config:
    """Read ``path``, else ``root/hostcore.toml`` if present, else defaults.

    An explicitly named file that does not exist is an error; the default one
    is optional.
    """
    if path is None:
        candidate = root / CONFIG_FILE_NAME
        if not candidate.exists():
            return Config(Settings(), None, watch=candidate)
        path = candidate
    elif not path.exists():
        raise ConfigError(f"{path}: config file not found")
    # Imported only when there is a file to read: tomllib costs a cold start
    # without one (an empty root) more than the rest of this module.
    import tomllib

    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValueError:
        # An integer past CPython's digit limit is refused by int() inside tomllib,
        # which lets that ValueError through instead of reporting a TOML error.
        raise ConfigError(f"{path}: not valid TOML: a number has more than "
                          f"{sys.get_int_max_str_digits()} digits") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: tables or arrays nested too deep") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from None
    return Config(parse_settings(raw, str(path)), path)


def _stamp(path: Path | None) -> tuple[int, int, int] | None:
    """What tells a changed file: inode, size and modification time."""
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


def parse_settings(raw: Any, origin: str) -> Settings:
    """Decode parsed TOML (or a mapping) as :class:`Settings`; ``origin`` names it in errors."""
    # msgspec names a bad dict value only as `plugins[...]`: check the tables here
    # so the message can name the plugin.
    plugins = raw.get("plugins") if isinstance(raw, dict) else None
    if isinstance(plugins, dict):
        for name, table in plugins.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{origin}: bad value for `plugins.{name}`: "
                                  f"expected a table, got {type(table).__name__}")
        twice = two_spellings(plugins)
        if twice is not None:
            raise ConfigError(f"{origin}: [plugins.{twice[0]}] and [plugins.{twice[1]}] are "
                              "the same plugin's table; keep one")
    try:
        return msgspec.convert(raw, type=Settings)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{origin}: {describe_error(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{origin}: tables or arrays nested too deep") from None


def describe_error(exc: msgspec.ValidationError) -> str:
    """Turn msgspec's ``... - at `$.run`"`` into a message naming the dotted key."""
    message = str(exc)
    head, sep, where = message.partition(" - at `$")
    key = where.rstrip("`").lstrip(".")
    if head.startswith("Object contains unknown field `"):
        field = head.split("`")[1]
        dotted = f"{key}.{field}" if key else field
        return f"unknown key `{dotted}`"
    if not sep:
        return message
    return f"bad value for `{key}`: {head}"
