"""Registration: the ``github-capture`` worker, its events and the ``capture`` commands.

The worker runs the sidecar tick and then the capture step (see
:mod:`hostcore_github_capture.worker`). Capture is a worker step rather than a
source on purpose: it must run after the sidecar has re-derived its triggers
in the same tick, so a repository withheld a moment ago is never polled on
the strength of the inventory from before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    import click

    from hostcore.host import Host
    from hostcore.telemetry import EventSpec
    from hostcore_github_capture.worker import CaptureWorker


@hookimpl
def hostcore_events() -> tuple[EventSpec, ...]:
    from hostcore_github_capture.events import EVENTS

    return EVENTS


@hookimpl
def hostcore_workers(host: Host) -> CaptureWorker:
    from hostcore_github_capture.worker import CaptureWorker

    return CaptureWorker(host)


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    from hostcore_github_capture.commands import register

    register(cli)
