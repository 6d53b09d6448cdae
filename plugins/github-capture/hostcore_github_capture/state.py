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
# GitHub's rate-limit windows last an hour: a longer wait is capped to it (and
# one further ahead was written by a wrong clock, or a wrong reset header).
MAX_BACKOFF_SECONDS = 3600.0

T = TypeVar("T", bound=msgspec.Struct)


class PartitionMark(msgspec.Struct, kw_only=True):
    """How far the inventory has read one partition.

    ``version`` is the partition's ``epoch:rowCount`` read before ``cursor`` was
    chosen; every row it counts lies at or before ``cursor`` once the read is
    ``caught_up``, so a later version that did not grow from it means evidence
    the inventory rests on may be gone, and one that grew by ``n`` rows has at
    most ``n`` rows after ``cursor``. ``caught_up`` is false while a budget
    stopped the read short.
    """

    version: str
    cursor: int = 0
    caught_up: bool = True


class Revalidation(msgspec.Struct, kw_only=True):
    """A revalidation pass under way; cleared by the swap that completes it.

    When the pass starts it notes every partition's ``versions`` and then the
    store's ``head`` position (in that order: every row a version counts lies at
    or before ``head``) and the ``store_instance`` it reads. It reads what lies
    at or before ``head``; the rows appended after are the next ordinary ticks'.
    ``confirmed`` holds the keys re-derived so far (what capture may use until
    the swap). ``unit`` is what the pass reads: ``rows`` (every partition's rows
    up to ``position``, one window of positions a tick) or ``tuples``
    (``cursors`` are the last tuple id read per partition, one window for all,
    ``completed`` the partitions read to their end; ``tuple_head`` the highest
    tuple id when it started: tuples that appear later are the ordinary ticks'
    rows).
    ``positions_read`` is what a pass by rows charged to its budgets: positions
    covered, rows withheld included.

    A record without ``head`` was written by a release before these fields:
    the pass starts over.
    """

    fingerprint: str
    trigger: str
    started_at: float
    prior_size: int
    store_instance: str | None = None
    head: int | None = None
    versions: dict[str, str] = msgspec.field(default_factory=dict)
    unit: str = "rows"
    position: int = 0
    cursors: dict[str, int] = msgspec.field(default_factory=dict)
    tuple_head: int | None = None
    completed: list[str] = msgspec.field(default_factory=list)
    confirmed: list[str] = msgspec.field(default_factory=list)
    positions_read: int = 0
    rows_read: int = 0
    tuples_read: int = 0
    slices: int = 0
    unrecognised: int = 0


class SidecarState(msgspec.Struct, kw_only=True):
    """The inventory and its derivation (``sidecar.json``).

    Times are seconds since the epoch. ``policy_fingerprint`` is the export
    fingerprint ``repos`` was derived under (``None``: never derived, or written
    before fingerprints existed); ``store_instance`` the instance id of the store
    file the partition marks describe (``None``: written before it was kept);
    ``derived_at`` is when the last derivation completed; ``ignore`` lists keys
    the user never wants captured.
    """

    repos: list[str] = msgspec.field(default_factory=list)
    partitions: dict[str, PartitionMark] = msgspec.field(default_factory=dict)
    policy_fingerprint: str | None = None
    store_instance: str | None = None
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
    ``store_instance`` is the store the ETags and newest ids were stored into
    (``None``: written before it was kept; the store in use is then adopted).
    ``gh_unavailable`` is whether the last poll found ``gh`` unable to run or
    logged out: its warning is said when this turns true, not on every tick of
    every process while it stays so.
    """

    repos: dict[str, RepoPoll] = msgspec.field(default_factory=dict)
    backoff_until: float = 0.0
    store_instance: str | None = None
    gh_unavailable: bool = False


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
