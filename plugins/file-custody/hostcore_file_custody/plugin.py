"""The hostcore plugin: catalogued events, the custody worker and the ``custody`` commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl
from hostcore_file_custody.events import EVENTS

if TYPE_CHECKING:
    import click

    from hostcore.host import Host
    from hostcore.telemetry import EventSpec
    from hostcore_file_custody.worker import CustodyWorker


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> CustodyWorker:
    from hostcore_file_custody.worker import CustodyWorker

    return CustodyWorker(host)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    from hostcore_file_custody.commands import add_commands

    add_commands(cli)
