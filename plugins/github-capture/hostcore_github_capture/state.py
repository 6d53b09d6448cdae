"""The plugin's persisted state: two JSON files under ``<root>/plugins/github-capture/``.

``sidecar.json`` (:class:`SidecarState`) is the inventory and how it was
derived; ``capture.json`` (:class:`CaptureState`) is per-repository polling
state (ETags, poll intervals, the rate-limit backoff). Both are written whole
with :func:`hostcore.files.atomic_write`, so a reader — or a process restarted
after SIGKILL — sees either the previous file or the next one.

Both are bounded by the number of distinct repositories plus one entry per
partition, never by evidence rows. ``capture.json`` is disposable: losing it
costs re-fetching events, which the store de-duplicates by event id.

Decoding tolerates unknown fields and fills missing ones with defaults, which
is how a sidecar written before revalidation existed (no
``policy_fingerprint``) loads, and then revalidates once. A file that does not
decode raises :class:`~hostcore.errors.RecordError` naming it; nothing
overwrites it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Generic, TypeVar

import msgspec

from hostcore.files import atomic_write
from hostcore.records import decode_json, encode_json

SIDECAR_FILE = "sidecar.json"
CAPTURE_FILE = "capture.json"

T = TypeVar("T", bound=msgspec.Struct)


class PartitionMark(msgspec.Struct, kw_only=True):
    """How far the inventory has read one partition.

    ``version`` is the partition's ``epoch:rowCount`` when the read that reached
    ``cursor`` started; every row at or before ``cursor`` existed then, so a later
    version that did not grow from it means evidence the inventory rests on may
    be gone. ``caught_up`` is false while a budget stopped the read short.
    """

    version: str
    cursor: int = 0
    caught_up: bool = True


class Revalidation(msgspec.Struct, kw_only=True):
    """A revalidation pass under way; cleared by the swap that completes it.

    ``confirmed`` holds the keys re-derived so far (what capture may use until
    the swap), ``versions`` each partition's version when the pass last read it
    (first read it, for a pass by tuples), ``completed`` the partitions read to
    their end. ``unit`` is what the pass reads: ``rows`` (``cursors`` are the
    last row position read) or ``tuples`` (``cursors`` are the last tuple id
    read, and ``snapshots`` the store's head position when each partition was
    first read: rows after it are read by the ordinary ticks after the swap).
    """

    fingerprint: str
    trigger: str
    started_at: float
    prior_size: int
    confirmed: list[str] = msgspec.field(default_factory=list)
    cursors: dict[str, int] = msgspec.field(default_factory=dict)
    versions: dict[str, str] = msgspec.field(default_factory=dict)
    completed: list[str] = msgspec.field(default_factory=list)
    unit: str = "rows"
    snapshots: dict[str, int] = msgspec.field(default_factory=dict)
    rows_read: int = 0
    tuples_read: int = 0
    slices: int = 0
    unrecognised: int = 0


class SidecarState(msgspec.Struct, kw_only=True):
    """The inventory and its derivation (``sidecar.json``).

    Times are seconds since the epoch. ``policy_fingerprint`` is the export
    fingerprint ``repos`` was derived under (``None``: never derived, or written
    before fingerprints existed); ``derived_at`` is when the last derivation
    completed; ``ignore`` lists keys the user never wants captured.
    """

    repos: list[str] = msgspec.field(default_factory=list)
    partitions: dict[str, PartitionMark] = msgspec.field(default_factory=dict)
    policy_fingerprint: str | None = None
    derived_at: float | None = None
    revalidation: Revalidation | None = None
    ignore: list[str] = msgspec.field(default_factory=list)


class RepoPoll(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Polling state of one repository's events.

    ``etag`` and ``newest_id`` describe the newest first page stored completely;
    ``poll_after`` honours ``X-Poll-Interval`` (and delays after failures);
    ``polled_at`` orders repositories so every one gets its turn.
    """

    etag: str | None = None
    newest_id: str | None = None
    poll_after: float = 0.0
    polled_at: float = 0.0


class CaptureState(msgspec.Struct, kw_only=True):
    """Polling state of every captured repository (``capture.json``).

    ``backoff_until`` is when GitHub's rate limit lets requests resume.
    """

    repos: dict[str, RepoPoll] = msgspec.field(default_factory=dict)
    backoff_until: float = 0.0


class StateFile(Generic[T]):
    """One state file: decoded on demand, re-read only when it changed on disk.

    The decoded value is shared between calls: treat it as read-only and
    :meth:`save` a modified copy (``msgspec.structs.replace``). Every process
    that writes these files does so under the host's step lock, and a write
    replaces the file (a new inode), so the stat signature tells a change apart.
    """

    def __init__(self, path: Path, type_: type[T]) -> None:
        self.path = path
        self.type = type_
        self._cached: T | None = None
        self._signature: tuple[int, int, int] | None = None

    def load(self) -> T:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._cached, self._signature = None, None
            return self.type()
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if self._cached is None or signature != self._signature:
            data = self.path.read_bytes()
            self._cached = decode_json(data, self.type, what=str(self.path))
            self._signature = signature
        return self._cached

    def save(self, value: T) -> None:
        atomic_write(self.path, encode_json(value))
        stat = os.stat(self.path)
        self._cached = value
        self._signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def forget(self) -> None:
        """Drop the cached value, so the next :meth:`load` reads the file."""
        self._cached, self._signature = None, None
