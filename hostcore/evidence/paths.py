"""Directory paths as the policy and purge compare them, POSIX and Windows alike.

Evidence records the directory an agent ran in, as the agent wrote it: a POSIX
path, or a Windows path such as ``C:\\Users\\me\\repo`` when the transcript came
from Windows. Matching is on path boundaries (``/repo`` covers ``/repo/a`` but
not ``/repository``) after :func:`normalize_dir`:

* backslashes become ``/`` and repeated or trailing separators go away;
* a Windows path (drive letter or UNC ``\\\\server\\share``) is case-folded,
  because Windows compares paths without case.

Nothing here touches the file system.
"""

from __future__ import annotations

import re

_DRIVE = re.compile(r"^[A-Za-z]:(/|$)")
_REPEATED = re.compile(r"/{2,}")


def normalize_dir(path: str) -> str:
    """The comparable form of ``path`` (empty stays empty)."""
    if not path:
        return ""
    unc = path.startswith(("\\\\", "//"))
    text = path.replace("\\", "/")
    text = _REPEATED.sub("/", text)
    if len(text) > 1:
        text = text.rstrip("/") or "/"
    if unc:
        text = "/" + text
    if unc or _DRIVE.match(text):
        text = text.casefold()
    return text


def ancestors(normalized: str) -> list[str]:
    """``normalized`` and each directory above it, nearest first.

    ``/a/b`` gives ``["/a/b", "/a", "/"]``; ``c:/a`` gives ``["c:/a", "c:"]``.
    """
    if not normalized:
        return []
    found = [normalized]
    current = normalized
    while True:
        head, sep, _ = current.rpartition("/")
        if not sep:
            break
        current = head or "/"
        if current == found[-1]:
            break
        found.append(current)
        if current == "/":
            break
    return found


def within(directory: str, entry: str) -> bool:
    """True when ``directory`` is ``entry`` or below it (both raw paths)."""
    return normalize_dir(entry) in ancestors(normalize_dir(directory))
