"""Everything a plugin author imports, in one place.

::

    from hostcore import hookimpl
    from hostcore.plugin import EvidenceRow, SourceBatch, WorkerResult

* the markers :data:`hookimpl` and :data:`hookspec`, and :class:`Host`;
* the registration Protocols a hook's objects satisfy: :class:`Source`,
  :class:`Provider`, :class:`PolicyInput`, :class:`TelemetrySink`,
  :class:`Worker`, :class:`Destination`;
* the values that cross a plugin boundary: :class:`WorkerResult`,
  :class:`EvidenceRow`, :class:`SourceBatch`, :class:`PartitionVersion`,
  :class:`WorkItemRef`, :class:`WorkItem`, :class:`ScopeListing`,
  :class:`Listing`, :class:`Closure`, :class:`WorkItemEvent`,
  :class:`ExportBatch`, :class:`ExportRow`, :class:`Ref`, :class:`Event`,
  :class:`EventSpec`, and :func:`apply_governance`;
* the errors a plugin raises or meets: :class:`ProviderError`,
  :class:`Conflict`, :class:`ConfigError`, :class:`RecordError`,
  :class:`HostcoreError`, and :class:`StepFailed` (a worker's step that failed
  after part of its work);
* for destinations: :func:`check_continuity` and :class:`DestinationChanged`;
* state-file helpers: :func:`atomic_write`, :func:`ensure_dir`, :func:`file_lock`,
  and :func:`decode_json` / :func:`encode_json` (errors name the input).

CLI helpers for ``hostcore_commands`` are in :mod:`hostcore.plugin.cli`; the
test fixtures and conformance suites in :mod:`hostcore.testing`. Importing this
module is cheap: each name loads its home module on first use.

Package layout: :mod:`~hostcore.plugin.markers`, :mod:`~hostcore.plugin.hookspecs`
(every hook, documented), :mod:`~hostcore.plugin.registration` (the Protocols and
their validation), :mod:`~hostcore.plugin.loader` (entry points, allow and block
lists, strict mode, entry-point names), :mod:`~hostcore.plugin.calls` (every hook
called one plugin at a time), :mod:`~hostcore.plugin.registry` (the typed registry) and
:mod:`~hostcore.plugin.cli`.

Imports. Every module here but :mod:`~hostcore.plugin.cli` is below the host
(:mod:`hostcore.host` imports the loader, the Protocols and the registry at module
level): at module level and inside functions alike it imports only the foundation
modules (:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`, :mod:`~hostcore.config`,
:mod:`~hostcore.files`, :mod:`~hostcore.records`, :mod:`~hostcore.telemetry`), this
package and the root package (the version numbers). :mod:`hostcore.plugin.cli` sits on
the host: it also imports :mod:`hostcore.host` at module level, so nothing below the
host imports it. :mod:`hostcore.host` and the value modules of the domain packages named
above are imported only under ``TYPE_CHECKING``, or by name when used (this module's
names on first access, the built-in plugins when a host loads them); this ``__init__``
imports nothing at module level.
"""

from __future__ import annotations

import importlib

# Not typing's (see hostcore/__init__.py): mypy reads a constant of this name as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from hostcore.errors import ConfigError, HostcoreError, RecordError
    from hostcore.evidence.rows import EvidenceRow, PartitionVersion, SourceBatch
    from hostcore.export.batch import (
        DestinationChanged,
        ExportBatch,
        ExportRow,
        apply_governance,
        check_continuity,
    )
    from hostcore.export.ref import DEFAULT_STREAM, Conflict, Ref
    from hostcore.files import atomic_write, ensure_dir, file_lock
    from hostcore.host import Host
    from hostcore.plugin.markers import hookimpl, hookspec
    from hostcore.plugin.registration import (
        Destination,
        PolicyInput,
        Provider,
        Source,
        StepFailed,
        TelemetrySink,
        Worker,
        WorkerResult,
    )
    from hostcore.records import decode_json, encode_json
    from hostcore.telemetry import Event, EventSpec
    from hostcore.workitems.items import (
        Closure,
        Listing,
        ProviderError,
        ScopeListing,
        WorkItem,
        WorkItemEvent,
        WorkItemRef,
    )

_HOMES: dict[str, str] = {
    **dict.fromkeys(("hookimpl", "hookspec"), "hostcore.plugin.markers"),
    "Host": "hostcore.host",
    **dict.fromkeys(("Source", "Provider", "PolicyInput", "TelemetrySink", "Worker",
                     "Destination", "WorkerResult", "StepFailed"),
                    "hostcore.plugin.registration"),
    **dict.fromkeys(("EvidenceRow", "SourceBatch", "PartitionVersion"),
                    "hostcore.evidence.rows"),
    **dict.fromkeys(("WorkItemRef", "WorkItem", "ScopeListing", "Listing", "Closure",
                     "WorkItemEvent", "ProviderError"), "hostcore.workitems.items"),
    **dict.fromkeys(("ExportBatch", "ExportRow", "apply_governance", "check_continuity",
                     "DestinationChanged"), "hostcore.export.batch"),
    **dict.fromkeys(("decode_json", "encode_json"), "hostcore.records"),
    **dict.fromkeys(("Ref", "Conflict", "DEFAULT_STREAM"), "hostcore.export.ref"),
    **dict.fromkeys(("Event", "EventSpec"), "hostcore.telemetry"),
    **dict.fromkeys(("ConfigError", "RecordError", "HostcoreError"), "hostcore.errors"),
    **dict.fromkeys(("atomic_write", "ensure_dir", "file_lock"), "hostcore.files"),
}

__all__ = [
    "DEFAULT_STREAM",
    "Closure",
    "ConfigError",
    "Conflict",
    "Destination",
    "DestinationChanged",
    "Event",
    "EventSpec",
    "EvidenceRow",
    "ExportBatch",
    "ExportRow",
    "Host",
    "HostcoreError",
    "Listing",
    "PartitionVersion",
    "PolicyInput",
    "Provider",
    "ProviderError",
    "RecordError",
    "Ref",
    "ScopeListing",
    "Source",
    "SourceBatch",
    "StepFailed",
    "TelemetrySink",
    "WorkItem",
    "WorkItemEvent",
    "WorkItemRef",
    "Worker",
    "WorkerResult",
    "apply_governance",
    "atomic_write",
    "check_continuity",
    "decode_json",
    "encode_json",
    "ensure_dir",
    "file_lock",
    "hookimpl",
    "hookspec",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hostcore.plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
