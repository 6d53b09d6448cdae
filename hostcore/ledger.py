"""Deprecated alias of :mod:`hostcore.workitems.ledger` (0.1's ledger module is now
:mod:`~hostcore.workitems.ledger`, :mod:`~hostcore.workitems.records` and
:mod:`~hostcore.workitems.index`; its time helpers are :mod:`hostcore.timestamps`)."""

from hostcore._moved import alias

alias(__name__, "hostcore.workitems.ledger", {
    "INDEX_FORMAT": "hostcore.workitems.index.INDEX_FORMAT",
    "SLUG_HASH_LENGTH": "hostcore.workitems.records.SLUG_HASH_LENGTH",
    "SLUG_PREFIX_LENGTH": "hostcore.workitems.records.SLUG_PREFIX_LENGTH",
    "TRACKING": "hostcore.workitems.records.TRACKING",
    "decision_member": "hostcore.workitems.records.decision_member",
    "record_class": "hostcore.workitems.records.record_class",
    "format_utc": "hostcore.timestamps.format_utc",
    "parse_utc": "hostcore.timestamps.parse_exact",
    "TIME_FORMAT": lambda: "%Y-%m-%dT%H:%M:%SZ",
})
