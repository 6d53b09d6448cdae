"""Work items: what providers list, the portable ledger, and the poller that reconciles.

* :mod:`~hostcore.workitems.items` — refs, items, listings, closures, events;
* :mod:`~hostcore.workitems.records` — one portable JSON record per item;
* :mod:`~hostcore.workitems.index` — the re-derivable SQLite index over them;
* :mod:`~hostcore.workitems.ledger` — records and index together, locked;
* :mod:`~hostcore.workitems.poller` — the poll cycle (list, note, reconcile);
* :mod:`~hostcore.workitems.budget` — the time a cycle may still spend, for providers;
* :mod:`~hostcore.workitems.plugin`, :mod:`~hostcore.workitems.commands` — the
  built-in plugin (poll worker, events) and ``hostcore poll``.

May import: :mod:`hostcore.errors`, :mod:`hostcore.files`, :mod:`hostcore.records`,
:mod:`hostcore.timestamps`, :mod:`hostcore.export.ref` (the hash definitions) and
:mod:`hostcore.plugin`. The value types of :mod:`~hostcore.workitems.items` are
importable from this package too, as in 0.1.
"""

from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemEvent,
    WorkItemRef,
)

__all__ = ["Closure", "Listing", "ProviderError", "ScopeListing", "WorkItem", "WorkItemEvent",
           "WorkItemRef"]
