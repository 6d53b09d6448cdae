"""Each agent's hook settings: where they live, and hostcore's entries in them.

Claude Code reads hooks from ``settings.json`` (``$CLAUDE_CONFIG_DIR`` or
``~/.claude`` for the user, ``.claude/`` in a project); Codex from ``hooks.json``
beside its config (``$CODEX_HOME`` or ``~/.codex`` for the user, ``.codex/`` in a
project). Both take one shape::

    {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "...",
                                    "timeout": 30}]}]}}

hostcore's entry for an event is one group holding one command hook: the absolute
path of this ``hostcore``, its ``--root``, ``hook --agent NAME``, and an explicit
timeout. An entry is known as hostcore's by its command (a program named
``hostcore*`` running ``hook --agent NAME``), so installing again, from another
virtualenv or for another root, replaces it: one entry per event, always.
Everything else in the file (other settings, the user's own hooks, hostcore's
entries for another agent) is kept as it was, in its order. A file that is not a
JSON object with a ``hooks`` object of lists is refused, naming it, and left
untouched; writes are atomic.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from hostcore.agents.events import Agent
from hostcore.errors import HostcoreError
from hostcore.files import atomic_write

Scope = Literal["user", "project"]

# The events hostcore installs for, and each one's timeout (seconds). SessionEnd's
# is Claude Code's shared budget at most; Stop reads a transcript.
TIMEOUTS: dict[str, int] = {
    "SessionStart": 10,
    "UserPromptSubmit": 5,
    "PreToolUse": 5,
    "PostToolUse": 5,
    "Stop": 30,
    "SessionEnd": 2,
}
# A settings file hostcore writes when there was none: the user's alone to read.
NEW_FILE_MODE = 0o600


class SettingsRefused(HostcoreError):
    """A settings file hostcore will not rewrite (it does not parse, or its ``hooks``
    is not the shape the agent reads); the message names the file."""


class Entry(msgspec.Struct, frozen=True):
    """hostcore's hook for one event as found in a settings file."""

    event: str
    command: str
    timeout: int | None


def settings_path(agent: Agent, scope: Scope, *, env: Mapping[str, str],
                  project: Path) -> Path:
    """The file ``agent`` reads its hooks from at ``scope``."""
    if agent == "claude-code":
        if scope == "project":
            return project / ".claude" / "settings.json"
        folder = env.get("CLAUDE_CONFIG_DIR")
        return (Path(folder).expanduser() if folder else Path.home() / ".claude") \
            / "settings.json"
    if scope == "project":
        return project / ".codex" / "hooks.json"
    folder = env.get("CODEX_HOME")
    return (Path(folder).expanduser() if folder else Path.home() / ".codex") / "hooks.json"


def command_line(program: list[str], root: Path, agent: Agent) -> str:
    """The shell command an agent runs for each event (agents run it with ``sh``)."""
    return shlex.join([*program, "--root", str(root), "hook", "--agent", agent])


def is_ours(command: object, agent: Agent) -> bool:
    """Whether a hook's command is hostcore's hook for ``agent``."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if "hook" not in words or not any(os.path.basename(w).startswith("hostcore")
                                      for w in words[:words.index("hook")]):
        return False
    after = words[words.index("hook") + 1:]
    return after[:2] == ["--agent", agent] or f"--agent={agent}" in after[:1]


def read_settings(path: Path) -> dict[str, Any]:
    """The settings in ``path`` (``{}`` when there is none); :class:`SettingsRefused`
    when it cannot be edited safely."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsRefused(f"{path}: cannot be read: {exc.strerror}") from None
    if not text.strip():
        return {}
    try:
        settings = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SettingsRefused(f"{path}: is not valid JSON ({exc}); fix or move it, nothing "
                              "was written") from None
    if not isinstance(settings, dict):
        raise SettingsRefused(f"{path}: is not a JSON object; nothing was written")
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict) or not all(
            isinstance(groups, list) and all(isinstance(g, dict) for g in groups)
            for groups in hooks.values()):
        raise SettingsRefused(f"{path}: its \"hooks\" is not an object of lists of objects "
                              "(the shape the agent reads); nothing was written")
    return settings


def entries(settings: Mapping[str, Any], agent: Agent) -> list[Entry]:
    """hostcore's hooks for ``agent`` in ``settings``, in file order."""
    found = []
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group.get("hooks", []) if isinstance(group.get("hooks"), list) else []:
                if isinstance(hook, dict) and is_ours(hook.get("command"), agent):
                    timeout = hook.get("timeout")
                    found.append(Entry(event, hook["command"],
                                       timeout if isinstance(timeout, int) else None))
    return found


def without_ours(settings: dict[str, Any], agent: Agent) -> dict[str, Any]:
    """``settings`` with every hostcore hook for ``agent`` taken out (and the groups
    and events left empty by it); the rest as it was."""
    hooks: dict[str, Any] = {}
    for event, groups in settings.get("hooks", {}).items():
        kept_groups = []
        for group in groups:
            inner = group.get("hooks")
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [h for h in inner
                    if not (isinstance(h, dict) and is_ours(h.get("command"), agent))]
            if kept or not inner:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups or not groups:
            hooks[event] = kept_groups
    changed = dict(settings)
    if hooks or ("hooks" in settings and not settings["hooks"]):
        changed["hooks"] = hooks
    else:
        changed.pop("hooks", None)
    return changed


def with_ours(settings: dict[str, Any], agent: Agent, command: str) -> dict[str, Any]:
    """``settings`` with exactly one hostcore hook for ``agent`` per event of
    :data:`TIMEOUTS`, each after the user's own."""
    changed = without_ours(settings, agent)
    hooks = dict(changed.get("hooks", {}))
    for event, timeout in TIMEOUTS.items():
        group = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        hooks[event] = [*hooks.get(event, []), group]
    changed["hooks"] = hooks
    return changed


def render(settings: Mapping[str, Any]) -> bytes:
    # Indented as the agents write their own files, so a diff of the user's stays small.
    return (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode()


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``settings``, atomically, keeping the file's mode."""
    if path.is_symlink():
        path = path.resolve()  # a dotfiles manager's link stays a link to the new file
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    atomic_write(path, render(settings), mode)
