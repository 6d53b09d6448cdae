"""What crosses from the exporter to a destination: rows, batches, and the governance rule.

Plain msgspec Structs with no dependency on the store, so a destination plugin
imports them without loading SQLite. :func:`apply_governance` is the one
implementation of the per-component compare-and-swap every destination applies.
"""

from __future__ import annotations

import msgspec

from hostcore.export.ref import GOVERNANCE, Ref, assert_component

__all__ = ["EXPORT_COLUMNS", "EXPORT_ROW_FIELDS", "ExportBatch", "ExportRow", "apply_governance"]

EXPORT_COLUMNS = ("partition", "source_id", "session_id", "ts", "directory", "git_remote",
                  "payload", "key")
# An encoded ExportRow is a JSON array of these, in this order (a test keeps it in step).
EXPORT_ROW_FIELDS = ("position", *EXPORT_COLUMNS)

class ExportRow(msgspec.Struct, gc=False, array_like=True):
    """One exported row, as a destination receives and stores it.

    ``payload`` is the row's JSON payload, passed through verbatim. Encoded, a
    row is a JSON array in field order (:data:`EXPORT_ROW_FIELDS`), not an
    object: the names would repeat on every row, and the export writes millions
    of rows. (``gc=False``: a row holds only strings, ints and raw JSON, so it
    can never be part of a cycle, and a million of them need not be tracked by
    the collector.)
    """

    position: int
    partition: str
    source_id: str
    session_id: str
    ts: str
    directory: str
    git_remote: str
    payload: msgspec.Raw
    key: str | None = None


class ExportBatch(msgspec.Struct, kw_only=True):
    """What one push hands a destination.

    ``rows`` are in ascending position order; a destination appends those past
    its position and drops the rest. ``sets`` carries the governance identities
    this push changes (empty components are left as the destination holds
    them); ``expect`` carries, for each of those, the value the pusher last
    observed at the destination (empty asserts nothing). ``origin`` is the
    identity of the store the positions come from: positions of two stores are
    two feeds. A batch may carry no rows, only a governance change.
    """

    stream: str
    origin: str
    rows: list[ExportRow]
    sets: Ref = Ref()
    expect: Ref = Ref()


def apply_governance(held: Ref, batch: ExportBatch) -> Ref:
    """The identities a destination publishes after ``batch``, or raise ``Conflict``.

    Destinations call this under their own lock, before writing any row. A
    component already holding the value being set is not a conflict: the write
    it asks for has already happened (a rerun after a kill between the
    destination's write and the pusher's record of it).
    """
    changes: dict[str, str] = {}
    for component in GOVERNANCE:
        new = getattr(batch.sets, component)
        current = getattr(held, component)
        if not new or new == current:
            continue
        assert_component(component, getattr(batch.expect, component), current)
        changes[component] = new
    return msgspec.structs.replace(held, **changes) if changes else held
