"""Work items: what providers list, the portable ledger, and the poller that reconciles.

* :mod:`~hostcore.workitems.items` — refs, items, listings, closures, events;
* :mod:`~hostcore.workitems.records` — one portable JSON record per item;
* :mod:`~hostcore.workitems.index` — the re-derivable SQLite index over them;
* :mod:`~hostcore.workitems.ledger` — records and index together, locked;
* :mod:`~hostcore.workitems.poller` — the poll cycle (list, note, reconcile);
* :mod:`~hostcore.workitems.budget` — the time a cycle may still spend, for providers;
* :mod:`~hostcore.workitems.plugin`, :mod:`~hostcore.workitems.commands` — the
  built-in plugin (poll worker, events) and ``hostcore poll``.

Imports follow the table in ``docs/architecture.md`` (checked by
``tests/test_import_rules.py``): nothing here imports the evidence package, the rest
of :mod:`hostcore.export` (only its hash definitions, :mod:`hostcore.export.ref`), the
tick loop or the CLI application, not even inside a function; only
:mod:`~hostcore.workitems.commands` sits on the host, and only
:mod:`~hostcore.workitems.plugin` imports it, inside its ``hostcore_commands`` hook.
The host imports this package only inside functions (``host.ledger``,
``host.poller``); the exporter imports :mod:`~hostcore.workitems.ledger` inside a
function.

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
