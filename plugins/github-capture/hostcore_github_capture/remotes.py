"""Repository keys from ``git_remote`` values.

A key is ``owner/repo`` in lower case: GitHub compares both without case, so
``git@github.com:Org/Tool.git`` and ``https://github.com/org/tool`` are one
repository. Accepted forms, each with or without a trailing ``.git`` or ``/``:

* ``https://github.com/owner/repo`` (also ``http``, ``git``, with user info or a
  port; a query string or a fragment, which name no part of the repository, is
  left out)
* ``ssh://git@github.com/owner/repo`` (also ``ssh://…:22/…``, ``git+ssh://``)
* ``git@github.com:owner/repo`` (the scp-like form; the user part is optional)

Only GitHub's own hosts count. Anything else — another host, a local path, a
URL with more or fewer than two path segments, a name GitHub would not allow —
is not a repository: :func:`repo_key` returns ``None`` and callers count it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

GITHUB_HOSTS = frozenset({"github.com", "www.github.com", "ssh.github.com"})
_URL_SCHEMES = frozenset({"https", "http", "ssh", "git", "git+ssh", "ssh+git"})

# Patterns kept as text: re compiles each on first use and caches it, so a start
# that reads no remote pays nothing for them.
# user@host:path, the scp-like syntax git accepts when there is no "://".
_SCP = r"(?:[^@/:]+@)?(?P<host>[^/:@]+):(?P<path>.+)"
# The forms nearly every remote takes, matched without urlsplit (a pass meets
# thousands of distinct remotes); anything else goes through the full parser.
# Only text both parsers read alike may match here: plain ASCII user info, a
# port of at most four digits (always in range), path segments made of the
# characters a key may hold. A query, a fragment, a longer port, a tab urlsplit
# would drop: all of it goes to the full parser, so the two never disagree.
_COMMON = (
    r"(?i)(?:(?:https?|ssh|git)://(?:[A-Za-z0-9._~%!$&'()*+,;=:-]+@)?(?:www\.|ssh\.)?"
    r"github\.com(?::[0-9]{1,4})?/"
    r"|(?:git@)?github\.com:/?)"
    r"(?P<path>[A-Za-z0-9._-]+/[A-Za-z0-9._-]+?)/?")
_OWNER = r"[a-z0-9](?:[a-z0-9-]{0,38})"
_REPO = r"[a-z0-9._-]{1,100}"

# Verdicts kept by KeyReducer before it starts over: consecutive rows mostly
# repeat a handful of remotes, so a small cache serves nearly every lookup while
# keeping memory independent of how many rows stream past.
REDUCER_CACHE_SIZE = 4096


def repo_key(remote: str) -> str | None:
    """The ``owner/repo`` key of a GitHub remote, or ``None`` when it is not one."""
    text = remote.strip()
    if not text:
        return None
    common = re.fullmatch(_COMMON, text)
    if common is not None:
        return _path_key(common.group("path"))
    return parse_remote(text)


def parse_remote(text: str) -> str | None:
    """The full parser behind :func:`repo_key` (which tries the common forms first)."""
    if "://" in text:
        try:
            parts = urlsplit(text)
            host = parts.hostname
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError:
            return None
        if parts.scheme.lower() not in _URL_SCHEMES:
            return None
        path = parts.path
    else:
        match = re.fullmatch(_SCP, text)
        if match is None:
            return None
        host, path = match.group("host"), match.group("path")
    if host is None or host.lower() not in GITHUB_HOSTS:
        return None
    return _path_key(path)


def _path_key(path: str) -> str | None:
    path = path.strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4]
    segments = path.lower().split("/")
    if len(segments) != 2:
        return None
    owner, repo = segments
    if not re.fullmatch(_OWNER, owner) or not re.fullmatch(_REPO, repo) or repo in {".", ".."}:
        return None
    return f"{owner}/{repo}"


def parse_repo_argument(text: str) -> str | None:
    """A key from what a user typed: ``OWNER/REPO`` or any accepted remote form."""
    key = _path_key(text.strip()) if "/" in text and ":" not in text else None
    return key or repo_key(text)


class KeyReducer:
    """Turns a stream of remote strings into keys, remembering recent verdicts.

    ``unrecognised`` counts non-empty remotes that were not GitHub repositories
    (an empty remote means the row named none, and is not counted).
    """

    def __init__(self, cache_size: int = REDUCER_CACHE_SIZE) -> None:
        self.cache: dict[str, str | None] = {}
        self.cache_size = cache_size
        self.unrecognised = 0

    def key(self, remote: str, rows: int = 1) -> str | None:
        """The key of ``remote``, which ``rows`` rows carried."""
        cache = self.cache
        try:
            found = cache[remote]
        except KeyError:
            if len(cache) >= self.cache_size:
                cache.clear()
            found = cache[remote] = repo_key(remote) if remote else None
        if found is None and remote:
            self.unrecognised += rows
        return found
