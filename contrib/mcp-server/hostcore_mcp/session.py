"""The root a server answers about, and the staleness note of each session.

:class:`ServedRoot` keeps one read-only :class:`~hostcore.host.Host` for every
call and builds it again when the store file under it was replaced (a restored
backup, a store deleted and started anew): a host holding the old file open
would answer about evidence that is no longer there. A root that does not exist
is refused by name on every call rather than reported as an empty one, so a
mistyped ``--root`` never reads as "no work, no evidence".

:class:`Staleness` keeps one :class:`~hostcore.export.freshness.Freshness`
tracker per session. A stdio server has one session (its client), so its
trackers are per process; over streamable HTTP a client that keeps a session
(``Mcp-Session-Id``) gets its own, and requests that carry none share the
server's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from hostcore.errors import HostcoreError
from hostcore.evidence.store import STORE_FILE_NAME
from hostcore.export.freshness import Freshness
from hostcore.export.refcache import RefCache
from hostcore.host import Host

# The request header a streamable HTTP session is known by (MCP's transport spec).
SESSION_HEADER = "mcp-session-id"

StoreIdentity = tuple[int, int] | None


class RootMissing(HostcoreError):
    """The state root the server was started on is not there (any more)."""


class ServedRoot:
    """One read-only host over ``root``, rebuilt when the store file is replaced.

    :param build: makes a read-only host over ``root`` (the CLI's plugins and config).
    """

    def __init__(self, root: Path, build: Callable[[], Host]) -> None:
        self.root = root
        self._build = build
        self._host: Host | None = None
        self._store: StoreIdentity = None
        # Answers run on worker threads; the host's connections serve one call at a time.
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def host(self) -> Iterator[Host]:
        """The host to answer one call with, held for the length of the call."""
        with self._lock:
            if not self.root.is_dir():
                raise RootMissing(f"state root {self.root} does not exist (start the server "
                                  "with --root naming an existing root, or run `hostcore "
                                  "run --once` there first)")
            store = _identity(self.root / STORE_FILE_NAME)
            if self._host is None or store != self._store:
                self._close()
                self._host = self._build()
                self._store = store
            yield self._host

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._host is not None:
            host, self._host = self._host, None
            host.close()


def _identity(path: Path) -> StoreIdentity:
    """What tells one store file from the next put in its place; None when absent."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    # Not the size or times: every row a tick appends moves those, and the host it
    # opened reads the new rows anyway. A file put in the store's place is a new inode.
    return (found.st_dev, found.st_ino)


class Staleness:
    """The governance components that moved since a session's previous answer."""

    def __init__(self, root: Path) -> None:
        self._cache = RefCache(root)
        self._trackers: dict[str, Freshness] = {}
        self._lock = threading.Lock()

    def moved(self, session: str) -> list[str]:
        """What moved since ``session`` last asked: nothing on its first answer, a
        change once, to the first answer that spans it, and silence for a session
        that never observed governance (see :class:`Freshness`)."""
        with self._lock:
            tracker = self._trackers.get(session)
            if tracker is None:
                cache = self._cache
                tracker = self._trackers[session] = Freshness(
                    lambda: cache.load_observed().published_ref())
        return tracker.check()
