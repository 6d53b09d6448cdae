"""The ``directory-destination`` plugin: export to a folder, and publish its ref.

Configured by the ``[plugins.directory-destination]`` table of ``hostcore.toml``::

    [plugins.directory-destination]
    path = "~/outbox"      # relative paths are taken from the state root

Without ``path`` the destination is registered but unavailable: exporting moves
rows out of the store, so it happens only where someone asked for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.export.ref import Ref
from hostcore.plugin.markers import hookimpl
from hostcore.telemetry import EventSpec
from hostcore_directory_destination.destination import DirectoryDestination, Recovery

if TYPE_CHECKING:
    from hostcore.host import Host

PLUGIN_NAME = "directory-destination"

EVENTS = (
    EventSpec(
        "directory_destination.recovered",
        {"torn_bytes": int, "segments_dropped": int},
        "A push found the end of a segment torn by an interrupted write and cut it "
        "(bytes cut, and segments left with no complete row that were removed) before "
        "appending.",
    ),
)


class DirectoryDestinationConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.directory-destination]`` table. Unknown keys are errors."""

    path: str | None = None


def destination_for(host: Host) -> DirectoryDestination:
    """The destination ``host``'s configuration describes."""
    config = host.plugin_config(PLUGIN_NAME, DirectoryDestinationConfig)
    path = None
    if config.path:
        path = Path(config.path).expanduser()
        path = path if path.is_absolute() else host.root / path

    def recovered(recovery: Recovery) -> None:
        host.emit("directory_destination.recovered", torn_bytes=recovery.torn_bytes,
                  segments_dropped=recovery.segments_dropped)

    return DirectoryDestination(path, on_recover=recovered)


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_destinations(host: Host) -> DirectoryDestination:
    return destination_for(host)


@hookimpl
def hostcore_published_ref(stream: str, host: Host, destination: object) -> Ref | None:
    """The ref this plugin's folder publishes for ``host``'s store, when ``destination``
    is that folder; ``None`` for any other destination (another plugin answers)."""
    own = destination_for(host)
    if own.availability() is not None or not isinstance(destination, DirectoryDestination):
        return None
    if destination.key != own.key:
        return None
    return own.published(stream, host.store.instance_id)
