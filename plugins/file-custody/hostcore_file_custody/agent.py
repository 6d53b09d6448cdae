"""Which process a hook runs for: the agent, as an owner custody can judge.

An agent runs each hook as a short-lived command: Claude Code as hook → ``sh`` →
``claude``, Codex as hook → ``codex``. A session owned by the hook process would be
proven dead the moment the hook returns, so an agent-owned session is owned by the
**nearest ancestor of the calling process that is not a shell or a hook runner**,
read from ``/proc/<pid>/stat`` (its command name, field 2, and its parent, field 4).

Skipped command names (:data:`RUNNER_COMMANDS`): the shells an agent may run a hook
command through (``sh``, ``bash``, ``dash``, ``zsh``, ``fish``, ``ksh``, ``mksh``,
``ash``, ``busybox``) and the runners a hook command line may start with (``env``,
``timeout``, ``nohup``, ``nice``, ``setsid``, ``stdbuf``, ``time``, ``uv``, ``uvx``).
``node`` is *not* skipped: Claude Code installed from npm runs as ``node`` itself,
and Codex's npm launcher is the parent of the native ``codex``, which is the nearest.

The owner identity is the PID plus its start time (field 22), read only where
``/proc`` shows this process's own PID namespace (the gate :mod:`.owner` applies):
elsewhere a PID read in ``/proc`` is another namespace's, and nothing is resolved.
The walk stops at an init system or subreaper (:data:`INIT_COMMANDS`: ``init``,
``systemd``, ``tini``, ``dumb-init``, ...), past PID 1 and after :data:`MAX_ANCESTORS`
steps: an orphaned hook (its agent gone, re-parented) has no agent, and no session is
started for it. A PID 1 that is none of those (an agent run as a container's first
process) is an agent like any other.
"""

from __future__ import annotations

import os

import msgspec

from hostcore_file_custody.errors import AgentUnresolved
from hostcore_file_custody.owner import (
    OwnerRecord,
    current_host,
    proc_shows_our_namespace,
    read_proc_stat,
)

RUNNER_COMMANDS = frozenset({
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "ash", "busybox",
    "env", "timeout", "nohup", "nice", "setsid", "stdbuf", "time", "uv", "uvx",
})
# Init systems and subreapers: an orphaned hook is re-parented to one of them, so
# meeting one means the agent is gone. Any other PID 1 (an agent run as a container's
# first process) is an agent like any other.
INIT_COMMANDS = frozenset({
    "init", "systemd", "tini", "dumb-init", "docker-init", "catatonit", "s6-svscan",
    "runit", "launchd",
})
# A hook command line nests a few runners at most (timeout env sh -c ...).
MAX_ANCESTORS = 8


class AgentProcess(msgspec.Struct, frozen=True, kw_only=True):
    """A process as ``/proc`` showed it: PID, command name and start time (clock ticks)."""

    pid: int
    command: str
    start_ticks: int

    def owner(self) -> OwnerRecord:
        """The owner record of this process: no lifetime lock (the agent holds none);
        its PID and start time are the witnesses of its life."""
        return OwnerRecord(host=current_host(), pid=self.pid, start_ticks=self.start_ticks)


def _gate() -> None:
    if not proc_shows_our_namespace():
        raise AgentUnresolved("/proc does not show this process's PID namespace: the agent "
                              "process cannot be identified", "namespace")


def agent_process(pid: int) -> AgentProcess:
    """``pid`` as an agent owner; :class:`AgentUnresolved` when it is gone or unreadable."""
    _gate()
    stat = read_proc_stat(pid)
    if stat is None:
        raise AgentUnresolved(f"process {pid} is gone or unreadable", "gone")
    command, _parent, start_ticks = stat
    return AgentProcess(pid=pid, command=command, start_ticks=start_ticks)


def find_agent(pid: int | None = None) -> AgentProcess:
    """The nearest ancestor of ``pid`` (default: this process) that is not a shell or a
    hook runner. Raises :class:`AgentUnresolved` when the walk meets an init system (an
    orphaned hook), goes past PID 1 or :data:`MAX_ANCESTORS`, or cannot read ``/proc``."""
    _gate()
    current = os.getpid() if pid is None else pid
    start = read_proc_stat(current)
    if start is None:
        raise AgentUnresolved(f"process {current} is gone or unreadable", "gone")
    parent = start[1]
    for _ in range(MAX_ANCESTORS):
        stat = read_proc_stat(parent) if parent > 0 else None
        if parent <= 0 or (stat is not None and stat[0] in INIT_COMMANDS):
            raise AgentUnresolved("no agent among the ancestors (the hook was re-parented "
                                  "to init or a subreaper: its agent is gone)", "orphaned")
        if stat is None:
            raise AgentUnresolved(f"ancestor {parent} is gone or unreadable", "gone")
        command, grandparent, start_ticks = stat
        if command not in RUNNER_COMMANDS:
            return AgentProcess(pid=parent, command=command, start_ticks=start_ticks)
        parent = grandparent
    raise AgentUnresolved(f"no agent within {MAX_ANCESTORS} ancestors (all shells or "
                          "runners)", "too-deep")
