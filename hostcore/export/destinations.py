"""Choosing the export destination, and what identifies one.

Light on purpose: the export worker's availability check runs whenever plugins
are listed, so it must not import the export engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from hostcore.errors import ConfigError
from hostcore.plugin.registration import availability

if TYPE_CHECKING:
    from hostcore.host import Host


class ExportSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[plugins.export]``: which registered destination to push to when several are,
    how many rows one push carries, and the back-off after a failed run.

    ``batch_rows`` unset: the exporter's default (``BATCH_ROWS``). After ``n``
    failed runs in a row the next waits a delay drawn from ``[w/2, w]``, ``w =
    min(backoff_max_seconds, backoff_seconds * 2**(n-1))``.
    """

    destination: str | None = None
    batch_rows: Annotated[int, msgspec.Meta(ge=1)] | None = None
    backoff_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    backoff_max_seconds: Annotated[float, msgspec.Meta(gt=0)] = 1800.0


def destination_key(destination: Any) -> str:
    """What the ref cache is keyed by: ``destination.key`` when defined, else its name."""
    return str(getattr(destination, "key", None) or destination.name)


def select_destination(host: Host, name: str | None = None) -> Any:
    """The destination to export to, or :class:`ConfigError` saying why there is none.

    ``name``, else ``[plugins.export] destination``, else the one available
    destination. Several available and none named is an error, not a guess.
    """
    name = name or host.plugin_config("export", ExportSettings).destination
    registered = {d.name: d for d in host.destinations}
    if name is not None:
        if name not in registered:
            known = ", ".join(sorted(registered)) or "none"
            raise ConfigError(f"export destination {name!r} is not registered "
                              f"(registered: {known})")
        reason = availability(registered[name])
        if reason is not None:
            raise ConfigError(f"export destination {name!r} is unavailable: {reason}")
        return registered[name]
    reasons = {n: availability(d) for n, d in registered.items()}
    available = [n for n, reason in reasons.items() if reason is None]
    if len(available) == 1:
        return registered[available[0]]
    if available:
        raise ConfigError(f"several export destinations are available ({', '.join(available)}); "
                          "name one with [plugins.export] destination")
    if not registered:
        raise ConfigError("no export destination is registered; install one, such as "
                          "hostcore-directory-destination")
    why = "; ".join(f"{n}: {r}" for n, r in reasons.items())
    raise ConfigError(f"no export destination is available ({why})")


def destination_instance(destination: Any) -> str:
    """The destination's instance id (its optional ``instance()``), ``""`` without one."""
    instance = getattr(destination, "instance", None)
    return str(instance()) if callable(instance) else ""
