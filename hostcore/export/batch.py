"""What crosses from the exporter to a destination: rows, batches, and the rules.

Plain msgspec Structs with no dependency on the store, so a destination plugin
imports them without loading SQLite. Two functions hold the rules every
destination applies under its own lock, before it writes anything:

* :func:`check_continuity` — the destination is the one, at the position, the
  pusher resumed from; otherwise :class:`DestinationChanged` (the pusher then
  resumes from the destination's own position, as a client relists after a
  stale resourceVersion);
* :func:`apply_governance` — the per-component compare-and-swap of the
  governance this origin publishes.

Governance is kept per (stream, origin): hosts sharing a destination never
write over each other's identities. Rows are keyed by (stream, origin, position).
"""

from __future__ import annotations

import msgspec

from hostcore.errors import HostcoreError
from hostcore.export.ref import GOVERNANCE, ComponentConflict, Conflict, Ref, assert_component

__all__ = ["EXPORT_COLUMNS", "EXPORT_ROW_FIELDS", "DestinationChanged", "ExportBatch",
           "ExportRow", "apply_governance", "check_continuity"]

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

    ``destination`` and ``after`` say what the pusher resumed from: the
    destination's instance id and the position it held for ``origin``. Empty
    and ``-1`` check nothing (a pusher that predates them).
    """

    stream: str
    origin: str
    rows: list[ExportRow]
    sets: Ref = Ref()
    expect: Ref = Ref()
    destination: str = ""
    after: int = -1


class DestinationChanged(HostcoreError):
    """The destination is not the one, or not at the position, the push resumed from.

    It was replaced, re-created or restored from a backup since the pusher read
    it. Nothing was written; the pusher resumes from what the destination holds.
    ``held`` is ``-1`` when the storage disappeared while the push ran (what
    was written may be gone with it).
    """

    def __init__(self, expected: str, found: str, after: int, held: int) -> None:
        self.expected = expected
        self.found = found
        self.after = after
        self.held = held
        if held < 0:
            what = "was removed during the push"
        elif expected and expected != found:
            what = "is another instance"
        else:
            what = f"holds position {held}, not {after}"
        super().__init__(f"the destination {what} since this export resumed; "
                         "resuming from what it holds")

    def __reduce__(self) -> tuple[type[DestinationChanged], tuple[str, str, int, int]]:
        return (type(self), (self.expected, self.found, self.after, self.held))


def check_continuity(batch: ExportBatch, instance: str, held: int) -> None:
    """Raise :class:`DestinationChanged` unless the destination (``instance``, holding
    ``held`` for the batch's origin) is what the pusher resumed from."""
    if (batch.destination and batch.destination != instance) or (
            batch.after >= 0 and batch.after != held):
        raise DestinationChanged(batch.destination, instance, batch.after, held)


def apply_governance(held: Ref, batch: ExportBatch) -> Ref:
    """The identities a destination publishes for the batch's origin after ``batch``,
    or raise ``Conflict``; ``held`` is what it publishes for that origin now.

    Destinations call this under their own lock, before writing any row. Every
    component is checked before anything is decided, so the ``Conflict`` names
    each one that moved (with the value the batch tried to write), not just the
    first. A component already holding the value being set is not a conflict:
    the write it asks for has already happened (a rerun after a kill between the
    destination's write and the pusher's record of it).
    """
    changes: dict[str, str] = {}
    conflicts: list[ComponentConflict] = []
    for component in GOVERNANCE:
        new = getattr(batch.sets, component)
        current = getattr(held, component)
        if not new or new == current:
            continue
        expected = getattr(batch.expect, component)
        try:
            assert_component(component, expected, current)
        except Conflict:
            conflicts.append(ComponentConflict(component=component, expected=expected,
                                               found=current, attempted=new))
            continue
        changes[component] = new
    if conflicts:
        raise Conflict.of(conflicts, stream=batch.stream)
    return msgspec.structs.replace(held, **changes) if changes else held
