"""Work items: what providers list, the portable ledger, and the poller that reconciles.

* :mod:`~hostcore.workitems.items` — refs, items, listings, closures, events;
* :mod:`~hostcore.workitems.records` — one portable JSON record per item;
* :mod:`~hostcore.workitems.index` — the re-derivable SQLite index over them;
* :mod:`~hostcore.workitems.ledger` — records and index together, locked;
* :mod:`~hostcore.workitems.poller` — the poll cycle (list, note, reconcile);
* :mod:`~hostcore.workitems.budget` — the time a cycle may still spend, for providers;
* :mod:`~hostcore.workitems.plugin`, :mod:`~hostcore.workitems.commands` — the
  built-in plugin (poll worker, events) and ``hostcore poll``.

Imports. Every module here but :mod:`~hostcore.workitems.commands` (the engine and the
built-in plugin), at module level and inside functions alike, imports only the
foundation modules (:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`,
:mod:`~hostcore.config`, :mod:`~hostcore.files`, :mod:`~hostcore.records`,
:mod:`~hostcore.telemetry`), :mod:`hostcore.plugin` (not :mod:`hostcore.plugin.cli`),
this package and :mod:`hostcore.export.ref` (the hash definitions: the one module of
another domain it imports); :mod:`hostcore.host` only under ``TYPE_CHECKING``.
:mod:`~hostcore.workitems.commands` sits on the host: it may also import
:mod:`hostcore.host` and :mod:`hostcore.plugin.cli`, and only
:mod:`~hostcore.workitems.plugin` imports it, inside its ``hostcore_commands`` hook.
Nothing here imports the evidence package, the rest of :mod:`hostcore.export`, the tick
loop or the CLI application, not even inside a function. The host imports this package
only inside functions (``host.ledger``, ``host.poller``); the exporter imports
:mod:`~hostcore.workitems.ledger` inside a function.

The value types of :mod:`~hostcore.workitems.items` are importable from this package
too, as in 0.1.
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
