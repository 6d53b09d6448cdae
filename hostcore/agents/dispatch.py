"""Whether a hook event gives any plugin work now, decided with the standard library alone.

``hostcore hook`` runs on every tool call an agent makes, and most of those calls
concern no plugin: a PostToolUse of ``Read`` for a plugin that watches writes, a
refresh inside its interval. So the hook first asks this module, which imports
nothing past the standard library (no msgspec, pluggy, logging or pathlib), whether
any plugin must be called; only when one is due does the hook build the host
(:mod:`hostcore.agents.hook`), and not even then when every due plugin declared a
lean handler for the event (:func:`lean_handlers`, run by
:mod:`hostcore.agents.lean_path`).

It reads the plugin index (:mod:`hostcore.agents.index` writes it): for each plugin
implementing ``hostcore_agent_event``, the events it declared, the tools whose tool
events it wants, and per event the shortest time between two calls for one session
(a throttle). A plugin is due for an event unless its declaration rules the event
out, or the throttle's stamp (``<root>/agents/stamps/<plugin>~<session>``, whose
modification time is the last call's) is younger than its interval. A plugin that
declared nothing is due for every event. Anything this module cannot vouch for (no
index or one made for other plugins, a payload the full decoder may refuse, a root
it cannot trust by one ``lstat``) is left to the full path, which notes faults and
rebuilds the index: this module only ever skips work it can prove nobody wants.
"""

from __future__ import annotations

import json
import os
import sys
import time

from hostcore.digests import blake2b
from hostcore.plugin.interest import KNOWN_EVENTS, TOOL_EVENTS, is_handler_name

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import BinaryIO, Literal

AGENTS: tuple[Literal["claude-code", "codex"], ...] = ("claude-code", "codex")
# The most of stdin a hook keeps (bytes). A PostToolUse can carry a whole file the
# tool read; what is past this is read and dropped, so the agent's write never fails.
MAX_INPUT_BYTES = 4 << 20

INDEX_FILE = os.path.join("agents", "plugin-index.json")
STAMPS_DIR = os.path.join("agents", "stamps")
# Part of the index's signature: an index written in another layout is rebuilt.
INDEX_FORMAT = 5
# The loader's and the host's variables (hostcore.plugin.loader, hostcore.host), named
# here so that this module imports neither; tests/test_agent_hook_dispatch.py checks.
ENV_ALLOW = "HOSTCORE_LOAD_PLUGINS"
ENV_BLOCK = "HOSTCORE_DISABLE_PLUGINS"
ENV_ROOT = "HOSTCORE_ROOT"

# The payload's fields an AgentEvent keeps, as the full decoder takes them
# (hostcore.agents.events._Payload): (type, required, may be null).
_FIELDS: dict[str, tuple[type, bool, bool]] = {
    "hook_event_name": (str, True, False), "session_id": (str, True, False),
    "cwd": (str, False, False), "transcript_path": (str, False, True),
    "tool_name": (str, False, True), "tool_use_id": (str, False, True),
    "source": (str, False, True), "reason": (str, False, True),
    "stop_hook_active": (bool, False, False),
}
# Stamps untouched this long belong to sessions whose agent died without an end.
STAMP_LIFETIME_SECONDS = 86400.0
_CHUNK = 1 << 16
_MAX_STAMP_NAME = 200


def read_input(stream: BinaryIO, limit: int = MAX_INPUT_BYTES) -> tuple[bytes, bool]:
    """Stdin up to ``limit`` bytes, and whether there was more (read and dropped)."""
    kept: list[bytes] = []
    size = 0
    oversized = False
    while chunk := stream.read(_CHUNK):
        if oversized or size + len(chunk) > limit:
            oversized = True
            continue
        kept.append(chunk)
        size += len(chunk)
    return b"".join(kept), oversized


def signature(env: Mapping[str, str]) -> str:
    """A digest of what decides which plugins load: the folders on ``sys.path`` (but
    the first) as they are now (installing, removing or upgrading a distribution adds
    or removes a metadata folder in one, which changes its modification time), the
    allow and block lists, and the index's format. One ``stat`` per folder."""
    parts = [f"format={INDEX_FORMAT}"]
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


def trusted_root(given: str | None, env: Mapping[str, str]) -> str | None:
    """The root named by ``--root`` or ``$HOSTCORE_ROOT`` if one ``lstat`` shows it is a
    folder of this user that nobody else can write; ``None`` otherwise (the default
    root, an empty name, a root still to be made or checked: the full path's)."""
    name = given if given is not None else env.get(ENV_ROOT)
    if not name or not name.strip():
        return None
    path = os.path.realpath(os.path.expanduser(name))
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if (found.st_mode & 0o170000) != 0o040000 or found.st_uid != os.geteuid() \
            or found.st_mode & 0o022:
        return None
    return path


def payload_fields(data: bytes) -> dict[str, object] | None:
    """The identifying fields of a hook's stdin, or ``None`` when the full decoder
    could refuse it (so the full path notes the fault)."""
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    fields: dict[str, object] = {}
    for name, (kind, required, nullable) in _FIELDS.items():
        if name not in payload:
            if required:
                return None
            continue
        value = payload[name]
        if value is None and nullable:
            continue
        if not isinstance(value, kind):
            return None
        fields[name] = value
    if fields["hook_event_name"] not in KNOWN_EVENTS or not fields["session_id"]:
        return None
    return fields


def read_index(root: str, expected: str) -> dict[str, object] | None:
    """The plugin index under ``root`` if it was made for ``expected`` (a signature)."""
    try:
        with open(os.path.join(root, INDEX_FILE), "rb") as file:
            found = json.loads(file.read())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("signature") != expected:
        return None
    return found


class Decision:
    """What the dispatcher proved about an event: the trusted ``root``, the payload's
    ``fields``, the plugin index ``found`` and the plugins ``due`` for it (empty:
    nothing to do)."""

    __slots__ = ("due", "fields", "found", "root")

    def __init__(self, root: str, fields: dict[str, object], found: dict[str, object],
                 due: list[str]) -> None:
        self.root = root
        self.fields = fields
        self.found = found
        self.due = due


def decide(given_root: str | None, agent: str | None, data: bytes,
           env: Mapping[str, str]) -> Decision | None:
    """What the event ``data`` (a hook's stdin, kept whole) is due, when this module
    can vouch for it: a known agent, a root one ``lstat`` trusts, a payload the full
    decoder takes and an index made for the installed plugins; ``None`` otherwise
    (the full path decides, noting any fault)."""
    if agent not in AGENTS:
        return None
    root = trusted_root(given_root, env)
    if root is None:
        return None
    fields = payload_fields(data)
    if fields is None:
        return None
    found = read_index(root, signature(env))
    if found is None:
        return None
    return Decision(root, fields, found, due_plugins(found, fields, root, time.time()))


def lean_handlers(decision: Decision) -> dict[str, str] | None:
    """Per due plugin, in order, the lean handler it declared for the event
    (:mod:`hostcore.plugin.lean`); ``None`` unless every due plugin has exactly one
    for it: then the host is built as usual."""
    interests = decision.found.get("interests")
    if not isinstance(interests, dict) or not decision.due:
        return None
    handlers = {}
    for plugin in decision.due:
        declared = interests.get(plugin)
        if not isinstance(declared, list):
            return None
        leans = {i.get("lean") if isinstance(i, dict) else None
                 for i in declared if _wants(i, decision.fields)}
        lean = leans.pop() if len(leans) == 1 else None
        if not is_handler_name(lean):
            return None
        assert isinstance(lean, str)
        handlers[plugin] = lean
    return handlers


def _stamp_path(root: str, plugin: str, session_id: str) -> str | None:
    # The session id is the agent's input: only a plain name becomes a file name
    # (an agent's UUID is one); any other session is never throttled.
    name = f"{plugin}~{session_id}"
    if len(name) > _MAX_STAMP_NAME or not name.isascii() \
            or not name.replace("-", "").replace("_", "").replace("~", "").isalnum():
        return None
    return os.path.join(root, STAMPS_DIR, name)


def _called_within(root: str, plugin: str, session_id: str, seconds: float,
                   now: float) -> bool:
    path = _stamp_path(root, plugin, session_id)
    if path is None:
        return False
    try:
        last = os.stat(path).st_mtime
    except OSError:
        return False
    # A stamp from the future means the clock was set back: due, or the plugin would
    # wait out the gap.
    return 0.0 <= now - last < seconds


def _wants(interest: object, fields: Mapping[str, object]) -> bool:
    if not isinstance(interest, dict):
        return True  # not a declaration this module knows: every event
    name = fields["hook_event_name"]
    events = interest.get("events")
    if isinstance(events, list) and name not in events:
        return False
    tools = interest.get("tools")
    return not (name in TOOL_EVENTS and isinstance(tools, list)
                and fields.get("tool_name") not in tools)


def due_plugins(found: Mapping[str, object], fields: Mapping[str, object], root: str,
                now: float) -> list[str]:
    """The indexed plugins (built-ins first, in registration order) that must be
    called for the event ``fields`` describes, at ``now`` (epoch seconds)."""
    interests = found.get("interests")
    if not isinstance(interests, dict):
        interests = {}
    names = [*_names(found.get("builtins")), *_names(found.get("plugins"))]
    due = []
    for plugin in names:
        declared = interests.get(plugin)
        if not isinstance(declared, list):
            due.append(plugin)  # declared nothing: every event
            continue
        wanting = [i for i in declared if _wants(i, fields)]
        if not wanting:
            continue
        # Skipped within an interval only when every declaration wanting the event has
        # one: a hookimpl that wants each call gets each call.
        intervals = [_interval(i, fields["hook_event_name"]) for i in wanting]
        if all(s is not None for s in intervals) and _called_within(
                root, plugin, str(fields["session_id"]),
                min(s for s in intervals if s is not None), now):
            continue
        due.append(plugin)
    return due


def _interval(interest: object, event: object) -> float | None:
    every = interest.get("every_seconds") if isinstance(interest, dict) else None
    seconds = every.get(event) if isinstance(every, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) else None


def _names(value: object) -> list[str]:
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


def throttled(found: Mapping[str, object]) -> set[str]:
    """The indexed plugins that declared an interval for some event."""
    interests = found.get("interests")
    if not isinstance(interests, dict):
        return set()
    return {name for name, declared in interests.items() if isinstance(declared, list)
            and any(isinstance(i, dict) and i.get("every_seconds") for i in declared)}


def stamp(root: str, plugins: Iterable[str], session_id: str, now: float) -> None:
    """Note that ``plugins`` were called for ``session_id`` at ``now``. Not durable: a
    stamp lost in a crash costs one early call, which the plugin answers itself."""
    for plugin in plugins:
        path = _stamp_path(root, plugin, session_id)
        if path is None:
            continue
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            os.utime(path, (now, now), follow_symlinks=False)
        except OSError:
            continue  # the next event calls the plugin again: work repeated, none lost


def forget(root: str, *, session_id: str | None = None,
           older_than: float | None = None) -> None:
    """Remove ``session_id``'s stamps (its session ended), and every stamp last
    touched before ``older_than`` (sessions whose agent died without an end)."""
    folder = os.path.join(root, STAMPS_DIR)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if (session_id is not None and entry.name.endswith(f"~{session_id}")) or (
                    older_than is not None and entry.stat().st_mtime < older_than):
                os.unlink(entry.path)
        except OSError:
            continue


def housekeep(root: str, event: str, session_id: str, stamped: Iterable[str]) -> None:
    """The throttle stamps after an event's calls: one per throttled plugin called
    (``stamped``), the session's removed at its end, abandoned ones at a start."""
    now = time.time()
    if event == "SessionEnd":
        forget(root, session_id=session_id)
        return
    if event == "SessionStart":
        forget(root, older_than=now - STAMP_LIFETIME_SECONDS)
    stamp(root, stamped, session_id, now)
