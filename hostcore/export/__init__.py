"""Export and freshness: pushing the permitted stream out, and knowing when it moved.

* :mod:`~hostcore.export.ref` — the composite ref, the comparison, the two hashes;
* :mod:`~hostcore.export.batch` — what crosses to a destination, and the
  governance compare-and-swap every destination applies;
* :mod:`~hostcore.export.refcache` — the disposable, destination-keyed ref cache;
* :mod:`~hostcore.export.freshness` — the per-process staleness note;
* :mod:`~hostcore.export.exporter` — the resumable export engine;
* :mod:`~hostcore.export.plugin`, :mod:`~hostcore.export.commands` — the built-in
  plugin (export worker, events) and ``hostcore export``.

May import: :mod:`hostcore.errors`, :mod:`hostcore.files`, :mod:`hostcore.records`,
the seam and store of :mod:`hostcore.evidence`, the ledger of
:mod:`hostcore.workitems` (for the decisions identity) and :mod:`hostcore.plugin`.
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
