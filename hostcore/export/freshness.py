"""Freshness for embedding agents: "did the ground move since I last read?"

An agent holding an answer for the length of a task has no other way to learn
that the governance it read has changed since. :class:`Freshness` keeps a
baseline ref and advances it on every :meth:`Freshness.check`:

* the first check reports nothing: nothing moved since a read that had not
  happened yet;
* a governance change is reported once, to the first check that spans it, and
  not again: a note repeated forever is a note a caller learns to skip;
* a baseline with no identities reports nothing: taking silence for a fact
  would report every first identity as a change;
* a read that makes no claim about a component (the ref cache was deleted, or
  names another destination) keeps the baseline's value for it: a deleted cache
  is not a change, and the next value read is compared with the last one known.

The tracked ref is what the destination published at the export's last contact
(``published`` in ``cache/refs.json``): the export refreshes it at its own
cadence, whoever moved it (this host's push, or another writer), so a check
costs one small file read and never a round trip to the destination.

The baseline is per process: :meth:`Freshness.observing` hands every caller in a
process (every :class:`~hostcore.host.Host` over the same root) the same
tracker, so a change is reported once per process, not once per host. A forked
child starts with no baseline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from hostcore.export.ref import DEFAULT_STREAM, GOVERNANCE, Ref, compare
from hostcore.export.refcache import RefCache


class Freshness:
    """A staleness tracker over one stream's ref.

    :param read: returns the ref to track; :meth:`observing` reads the ref
        cache. Injectable so any ref source can be tracked.
    """

    def __init__(self, read: Callable[[], Ref]) -> None:
        self._read = read
        self._baseline: Ref | None = None
        self._lock = threading.Lock()

    @classmethod
    def observing(cls, root: Path, stream: str = DEFAULT_STREAM) -> Freshness:
        """This process's tracker of ``stream`` as last published to ``<root>``'s export.

        One tracker per (root, stream) per process: every call with the same
        root and stream returns the same object.
        """
        key = (str(Path(root).resolve()), stream)
        with _PROCESS_LOCK:
            tracker = _PROCESS_TRACKERS.get(key)
            if tracker is None:
                cache = RefCache(Path(key[0]))
                tracker = _PROCESS_TRACKERS[key] = cls(
                    lambda: cache.load_observed().published_ref(stream))
            return tracker

    def check(self) -> list[str]:
        """The governance components that moved since the previous check.

        Empty on the first check, when the baseline holds no identities, and
        when nothing moved. The baseline becomes the ref just read, keeping the
        previous value of any component the read makes no claim about.
        """
        with self._lock:  # read inside: the baseline must advance in read order
            current = self._read()
            baseline = self._baseline
            self._baseline = current if baseline is None else _kept(baseline, current)
        if baseline is None:
            return []
        # compare() already treats an empty identity as unknown, never moved, so a
        # baseline without identities reports nothing.
        return compare(baseline, current).moved()


def _kept(baseline: Ref, current: Ref) -> Ref:
    """``current``, with the baseline's value wherever ``current`` claims nothing."""
    kept: dict[str, Any] = {c: getattr(baseline, c) for c in GOVERNANCE
                            if not getattr(current, c)}
    if not current.content:
        kept["content"] = baseline.content
    return msgspec.structs.replace(current, **kept) if kept else current


_PROCESS_TRACKERS: dict[tuple[str, str], Freshness] = {}
_PROCESS_LOCK = threading.Lock()


def _forget_in_child() -> None:
    # A forked child is another process: its baseline starts empty. A fresh lock,
    # too: the parent's may have been held by another thread at the fork.
    global _PROCESS_LOCK
    _PROCESS_TRACKERS.clear()
    _PROCESS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
