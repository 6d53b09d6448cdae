"""The values evidence is made of: what a source hands the store, and partition versions.

These are plain msgspec Structs with no dependency on SQLite, so a source plugin
can import them without loading the store.
"""

from __future__ import annotations

from typing import Any

import msgspec

from hostcore.errors import RecordError

__all__ = ["EvidenceRow", "PartitionVersion", "SourceBatch", "storable_text"]


class EvidenceRow(msgspec.Struct, kw_only=True, gc=False):
    """One piece of evidence as a source hands it to the store.

    ``ts`` is ISO-8601; a parseable value is stored in the canonical UTC form
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` so time-range purges compare correctly, an
    unparseable one is kept as given (and is never matched by ``before``).
    ``key``, when set, is unique within the partition: appending a row whose key
    is already there adds nothing, which makes re-reading an input idempotent.

    Rows are not tracked by the cycle collector (``gc=False``): a batch holds
    thousands, and tracking them made collections a tenth of an ingest. So a
    payload must never refer back to its row (JSON could not hold it anyway).
    """

    partition: str
    source_id: str
    session_id: str = ""
    ts: str = ""
    directory: str = ""
    git_remote: str = ""
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    key: str | None = None


class SourceBatch(msgspec.Struct):
    """What ``Source.read(cursor)`` returns: new rows and the cursor to persist.

    ``more`` tells the ingest worker the source stopped at a budget and has more
    ready now (the ingest step reads again while its time slice lasts, and the
    tick loop comes back at the backlog cadence). ``skipped`` counts, by reason,
    the input lines the source read past without making a row of them
    (``{"malformed": 2}``); the store adds them to the source's health, which
    ``hostcore status`` shows. Keep a batch small (thousands of rows): it is
    stored in one transaction, which a purge waits for.
    """

    rows: list[EvidenceRow]
    cursor: str | None
    more: bool = False
    skipped: dict[str, int] = msgspec.field(default_factory=dict)


class PartitionVersion(msgspec.Struct, frozen=True):
    """A partition's version. Compare versions only through :meth:`grew_from`."""

    epoch: int
    row_count: int

    def __str__(self) -> str:
        return f"{self.epoch}:{self.row_count}"

    def grew_from(self, older: PartitionVersion) -> bool:
        """True when this version is ``older`` plus appends only (no purge between)."""
        return self.epoch == older.epoch and self.row_count >= older.row_count

    @classmethod
    def parse(cls, text: str) -> PartitionVersion:
        """Read ``"epoch:rowCount"`` back (as persisted by consumers)."""
        epoch, sep, count = text.partition(":")
        if not sep or not epoch.isdigit() or not count.isdigit():
            raise RecordError(f"partition version {text!r}: expected 'epoch:rowCount'")
        return cls(int(epoch), int(count))


def storable_text(text: str) -> bool:
    """Whether ``text`` can be a text field of a row, here and at every destination.

    UTF-8 cannot hold a lone surrogate (a name with undecodable bytes), and
    PostgreSQL text cannot hold NUL: such a value would fail every push of the
    export, so it is counted and skipped when it arrives instead.
    """
    if text.isascii():
        return "\0" not in text
    if "\0" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True

