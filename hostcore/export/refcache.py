"""The ref cache: ``cache/refs.json`` under the state root.

For each stream it holds the position this host has consumed (pushed, for the
export stream) and the governance identities its last contact with the
destination established. Everything in it is true of one destination only, so
the file names the destination it was written for; a file written for another
destination is discarded, not reconciled.

The file is disposable. Everything in it can be re-derived from the destination,
so deleting it costs one more negotiation and never a wrong answer. For the same
reason it is never migrated, versioned or repaired: a file that does not decode
is treated as empty.

A position is a place in one store's feed, so the cache also records the
identity of the store it was taken from (:meth:`CachedRefs.bind_store`). When the
store is replaced every position is dropped; the governance identities stay,
since they describe what was published, not what the store holds. Likewise the
cache records the destination's instance id (:meth:`CachedRefs.bind_instance`):
a folder deleted and re-created under the same path is another destination, and
everything recorded about the old one is dropped.

Per stream the cache keeps three things:

* ``streams``: the position this host pushed and the governance identities its
  last agreement with the destination established (a write of its own, an
  adoption, or finding the destination already holding its value). A governance
  write asserts these;
* ``published``: the ref the destination published at the last contact,
  whoever wrote it (what the freshness tracker follows);
* ``conflicts``: the governance conflicts standing at the last contact, so each
  is announced once, not on every run.

Two readers, kept apart: :meth:`RefCache.load` is keyed by destination and is
what every writer goes through; :meth:`RefCache.load_observed` returns whatever
is on disk, as a read-only :class:`ObservedRefs`, for reports. Nothing decides
from an observed read, and :meth:`RefCache.save` does not accept one.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path
from typing import TypeVar

import msgspec

from hostcore.export.ref import DEFAULT_STREAM, ComponentConflict, Ref
from hostcore.files import atomic_write
from hostcore.records import encode_json

log = logging.getLogger("hostcore.export.refcache")

CACHE_PATH = Path("cache") / "refs.json"

T = TypeVar("T")


class CachedRefs(msgspec.Struct, kw_only=True):
    """The refs of one destination, as a writer loads and saves them."""

    destination: str
    store: str = ""  # identity of the store the positions were consumed from
    instance: str = ""  # the destination's instance id the entries are about
    streams: dict[str, Ref] = msgspec.field(default_factory=dict)
    published: dict[str, Ref] = msgspec.field(default_factory=dict)
    conflicts: dict[str, list[ComponentConflict]] = msgspec.field(default_factory=dict)

    def ref(self, stream: str = DEFAULT_STREAM) -> Ref:
        """The stream's agreed ref; the zero ref (no claim) when nothing is recorded."""
        return self.streams.get(stream, Ref())

    def record(self, stream: str, ref: Ref) -> None:
        """Replace the stream's agreed ref (after a contact with the destination)."""
        self.streams[stream] = ref

    def observe(self, stream: str, published: Ref) -> None:
        """Record what the destination publishes for ``stream`` at this contact."""
        self.published[stream] = published

    def record_conflicts(self, stream: str,
                         conflicts: list[ComponentConflict]) -> list[ComponentConflict]:
        """Record the conflicts standing for ``stream``; returns those not recorded before."""
        before = self.conflicts.get(stream, [])
        if conflicts:
            self.conflicts[stream] = list(conflicts)
        else:
            self.conflicts.pop(stream, None)
        return [c for c in conflicts if c not in before]

    def bind_store(self, instance_id: str) -> bool:
        """Bind the positions to the store ``instance_id``; True if positions were dropped.

        When the recorded store differs (including "none recorded"), every
        position is dropped and every identity kept: a position outliving the
        store it was consumed into claims content held nowhere.
        """
        if self.store == instance_id:
            return False
        dropped = any(ref.content for ref in self.streams.values())
        self.streams = {
            name: msgspec.structs.replace(ref, content=0) for name, ref in self.streams.items()
        }
        self.store = instance_id
        return dropped

    def bind_instance(self, instance: str) -> bool:
        """Bind the entries to the destination instance ``instance``; True if any were dropped.

        When the recorded instance differs (including "none recorded" while the
        destination now has one), the destination was replaced: everything
        recorded is about another destination and is dropped, identities
        included.
        """
        if self.instance == instance:
            return False
        dropped = bool(self.streams or self.published or self.conflicts)
        self.streams, self.published, self.conflicts = {}, {}, {}
        self.instance = instance
        return dropped


class ObservedRefs(msgspec.Struct, frozen=True, kw_only=True):
    """What the cache last recorded, whichever destination wrote it. For reports only."""

    destination: str = ""
    store: str = ""
    instance: str = ""
    streams: dict[str, Ref] = msgspec.field(default_factory=dict)
    published: dict[str, Ref] = msgspec.field(default_factory=dict)

    def ref(self, stream: str = DEFAULT_STREAM) -> Ref:
        """The stream's agreed ref (position pushed, identities last agreed)."""
        return self.streams.get(stream, Ref())

    def published_ref(self, stream: str = DEFAULT_STREAM) -> Ref:
        """What the destination published for ``stream`` at the last contact."""
        return self.published.get(stream, Ref())


class RefCache:
    """Reads and writes ``<root>/cache/refs.json``."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / CACHE_PATH

    def load(self, destination: str) -> CachedRefs:
        """The refs recorded for ``destination``; empty when the file is missing,
        unreadable, or was written for another destination."""
        cached = self._read(CachedRefs)
        if cached is None or cached.destination != destination:
            return CachedRefs(destination=destination)
        return cached

    def load_observed(self) -> ObservedRefs:
        """Whatever the file holds, for any destination; empty when unreadable."""
        return self._read(ObservedRefs) or ObservedRefs()

    def save(self, cached: CachedRefs) -> bool:
        """Write ``cached`` atomically, replacing whatever was there; False if it could not.

        The cache is disposable, so a file that cannot be written (a folder at
        its path, a full disk) is not a failure of whatever was being recorded:
        it costs one more negotiation at the next contact. It is logged with the
        error's kind only (no path).
        """
        if not isinstance(cached, CachedRefs):
            raise TypeError("only refs loaded with RefCache.load(destination) can be saved")
        try:
            atomic_write(self.path, encode_json(cached))
        except OSError as exc:
            log.warning("the ref cache could not be written (%s); the next contact "
                        "negotiates again", type(exc).__name__)
            return False
        return True

    def problem(self) -> str | None:
        """Why the cache file cannot be kept, if something other than a file is at its path."""
        try:
            mode = self.path.lstat().st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"cannot be read ({type(exc).__name__})"
        return None if stat.S_ISREG(mode) else "something other than a file is at its path"

    def _read(self, type_: type[T]) -> T | None:
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        try:
            return msgspec.json.decode(data, type=type_)
        except (msgspec.DecodeError, UnicodeDecodeError):
            # Not repaired, not migrated: the next contact rewrites it.
            return None
