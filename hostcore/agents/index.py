"""Which installed plugins implement ``hostcore_agent_event``, cached under the root.

A hook runs on every tool call, so it may not import every installed plugin to
learn which ones react to agent events. The first hook after the installed
plugins change loads them all once and writes the names of those implementing
the hook to ``<root>/agents/plugin-index.json``; every later hook loads only
those. The cache is keyed by the folders on ``sys.path`` as they are (see
:func:`signature`) and by the allow and block lists, so installing, removing or
upgrading a plugin, or changing the lists, rebuilds it. A plugin edited in place
(an editable install gaining the hook) is seen after ``hostcore hooks install``,
which rebuilds the index.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

from hostcore.files import atomic_write
from hostcore.plugin.loader import ENV_ALLOW, ENV_BLOCK, PluginSet

try:  # CPython's own BLAKE2, without hashlib's OpenSSL (see hostcore.evidence.blake2)
    from _blake2 import blake2b
except ImportError:  # an interpreter without it
    from hashlib import blake2b

FILE = Path("agents") / "plugin-index.json"
HOOK = "hostcore_agent_event"


class PluginIndex(msgspec.Struct, frozen=True):
    """The entry-point plugins implementing :data:`HOOK`, for one set of installed
    plugins (``signature``)."""

    signature: str
    plugins: tuple[str, ...]


def signature(env: Mapping[str, str]) -> str:
    """A digest of what decides which plugins load: the folders on ``sys.path`` (but
    the first) as they are now (installing, removing or upgrading a distribution adds or removes
    a metadata folder in one, which changes its modification time) and the allow
    and block lists. One ``stat`` per folder: no metadata file is read."""
    parts = []
    # The first entry is the running script's folder (or the working folder): the
    # same installation started as `hostcore` or `python -m hostcore` keeps its index.
    for entry in sys.path[1:]:
        try:
            found = os.stat(entry or ".")
        except OSError:
            continue
        parts.append(f"{entry}:{found.st_ino}:{found.st_mtime_ns}")
    parts.append(f"allow={env.get(ENV_ALLOW)!r} block={env.get(ENV_BLOCK)!r}")
    return blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def cached(root: Path, expected: str) -> tuple[str, ...] | None:
    """The plugins the cache names, or ``None`` when there is none for ``expected``."""
    try:
        index = msgspec.json.decode((root / FILE).read_bytes(), type=PluginIndex)
    except (OSError, msgspec.DecodeError):
        return None  # none yet, or unreadable: rebuilt
    return index.plugins if index.signature == expected else None


def implementers(plugins: PluginSet) -> tuple[str, ...]:
    """The loaded entry-point plugins of ``plugins`` implementing :data:`HOOK`."""
    return tuple(sorted(name for name, info in plugins.infos.items()
                        if info.status == "loaded" and HOOK in info.hooks))


def write(root: Path, index: PluginIndex) -> None:
    # Not durable: a cache lost in a power cut is rebuilt by the next hook.
    atomic_write(root / FILE, msgspec.json.encode(index), durable=False)
