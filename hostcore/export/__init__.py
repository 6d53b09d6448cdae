"""Export and freshness: pushing the permitted stream out, and knowing when it moved.

* :mod:`~hostcore.export.ref` — the composite ref, the comparison, the two hashes;
* :mod:`~hostcore.export.batch` — what crosses to a destination, and the
  governance compare-and-swap every destination applies;
* :mod:`~hostcore.export.refcache` — the disposable, destination-keyed ref cache;
* :mod:`~hostcore.export.freshness` — the per-process staleness note;
* :mod:`~hostcore.export.exporter` — the resumable export engine;
* :mod:`~hostcore.export.plugin`, :mod:`~hostcore.export.commands` — the built-in
  plugin (export worker, events) and ``hostcore export``.

Imports. At module level, every module here but :mod:`~hostcore.export.commands` (the
engine and the built-in plugin) imports only the foundation modules
(:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`, :mod:`~hostcore.config`,
:mod:`~hostcore.files`, :mod:`~hostcore.records`, :mod:`~hostcore.telemetry`),
:mod:`hostcore.plugin` (not :mod:`hostcore.plugin.cli`) and this package; inside a
function, also :mod:`hostcore.workitems.ledger` (the exporter's decisions identity) and,
from :mod:`~hostcore.export.plugin`'s ``hostcore_commands`` hook only,
:mod:`~hostcore.export.commands`; :mod:`hostcore.host` only under ``TYPE_CHECKING``. It
never imports :mod:`hostcore.evidence`: the seam and the store reach the exporter
through the host. :mod:`~hostcore.export.ref` imports only the foundation modules and
this ``__init__`` nothing at module level, so the evidence and work-item packages import
the ref without loading the exporter. :mod:`~hostcore.export.commands` sits on the host:
it may also import :mod:`hostcore.host` and :mod:`hostcore.plugin.cli`. The host imports
this package only inside a function (``host.freshness``).

The names of the 0.1 module ``hostcore.export`` stay importable from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hostcore.export.batch import ExportBatch, ExportRow, apply_governance
    from hostcore.export.destinations import select_destination
    from hostcore.export.exporter import Exporter, ExportSummary

__all__ = ["ExportBatch", "ExportRow", "ExportSummary", "Exporter", "apply_governance",
           "select_destination"]

_HOMES = {
    "ExportBatch": "hostcore.export.batch",
    "ExportRow": "hostcore.export.batch",
    "apply_governance": "hostcore.export.batch",
    "Exporter": "hostcore.export.exporter",
    "ExportSummary": "hostcore.export.exporter",
    "select_destination": "hostcore.export.destinations",
}


def __getattr__(name: str) -> Any:
    # Lazy: a destination that imports ExportBatch must not load the exporter.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hostcore.export' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
