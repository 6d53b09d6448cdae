"""Freshness for embedding agents: "did the ground move since I last read?"

An agent holding an answer for the length of a task has no other way to learn
that the governance it read has changed since. :class:`Freshness` keeps a
per-process baseline ref and advances it on every :meth:`Freshness.check`:

* the first check reports nothing: nothing moved since a read that had not
  happened yet;
* a governance change is reported once, to the first check that spans it, and
  not again: a note repeated forever is a note a caller learns to skip;
* a baseline with no identities reports nothing: taking silence for a fact
  would report every first identity as a change.

The ref comes from the ref cache on disk (``cache/refs.json``), which the
export refreshes at its own cadence, so a check costs one small file read and
never a round trip to the destination.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from hostcore.export.ref import DEFAULT_STREAM, Ref, compare
from hostcore.export.refcache import RefCache


class Freshness:
    """A per-process staleness tracker over one stream's observed ref.

    :param read: returns the ref to track; ``Freshness.observing(root)`` reads
        the ref cache. Injectable so any ref source can be tracked.
    """

    def __init__(self, read: Callable[[], Ref]) -> None:
        self._read = read
        self._baseline: Ref | None = None
        self._lock = threading.Lock()

    @classmethod
    def observing(cls, root: Path, stream: str = DEFAULT_STREAM) -> Freshness:
        """Track ``stream``'s ref as last recorded in ``<root>/cache/refs.json``."""
        cache = RefCache(root)
        return cls(lambda: cache.load_observed().ref(stream))

    def check(self) -> list[str]:
        """The governance components that moved since the previous check.

        Empty on the first check, when the baseline holds no identities, and
        when nothing moved. The baseline becomes the ref just read.
        """
        with self._lock:  # read inside: the baseline must advance in read order
            current = self._read()
            baseline, self._baseline = self._baseline, current
        if baseline is None:
            return []
        # compare() already treats an empty identity as unknown, never moved, so a
        # baseline without identities reports nothing.
        return compare(baseline, current).moved()
