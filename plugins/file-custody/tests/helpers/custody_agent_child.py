"""A stand-in agent and the hooks it runs, for agent-owned session tests.

Usage: custody_agent_child.py agent <registry> <instance>
       custody_agent_child.py hook <start|refresh|end> <registry> <instance> [pause-step]
       custody_agent_child.py reaper <registry> <instance>

``agent`` is the long-lived agent process. It prints ``ready <pid>``, then reads one
command per line on stdin and runs it as a hook, the way the agents do:

* ``sh <action> [step]``: hook → ``sh`` → agent (Claude Code's shape);
* ``direct <action> [step]``: hook → agent (Codex's shape);
* ``shell <command line>``: any command line, through ``sh`` (``hostcore hook``).

It relays each line the hook prints and then prints ``done <exit status>``. With a
``step``, the hook prints ``paused <step> <pid>`` at that point of its writes and
sleeps, so the test can SIGKILL it there.

``hook`` performs one start, refresh or end with the agent found from its ancestors,
and prints the result as JSON (with the command name of its parent as ``via``).

``reaper`` plays an init system: it names itself ``tini`` and becomes a child
subreaper, then has a shell start a hook in the background and exit, so the hook is
orphaned (re-parented to the reaper) before it starts its session; it prints what the
hook printed: the result, or ``{"unresolved": <reason>}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import subprocess
import sys
import time

import msgspec
from hostcore_file_custody import HeartbeatRegistry
from hostcore_file_custody.agent_sessions import (
    end_agent_session,
    refresh_agent_session,
    start_agent_session,
)
from hostcore_file_custody.errors import AgentUnresolved
from hostcore_file_custody.owner import read_proc_stat

PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36

ACTIONS = {"start": start_agent_session, "refresh": refresh_agent_session,
           "end": end_agent_session}


def hook(action: str, root: str, instance: str, pause: str | None = None) -> None:
    def on_step(step: str) -> None:
        if step == pause:
            print(f"paused {step} {os.getpid()}", flush=True)
            time.sleep(600)

    options = {"interval": 0.0} if action == "refresh" else {}
    result = ACTIONS[action](HeartbeatRegistry(root), instance, on_step=on_step, **options)
    parent = read_proc_stat(os.getppid())
    print(json.dumps({**msgspec.structs.asdict(result),
                      "via": None if parent is None else parent[0]}), flush=True)


def agent(root: str, instance: str) -> None:
    print(f"ready {os.getpid()}", flush=True)
    for line in sys.stdin:
        shape, _, rest = line.strip().partition(" ")
        if shape == "shell":
            argv = ["sh", "-c", f"{rest}; exit $?"]
        else:
            command = [sys.executable, os.path.abspath(__file__), "hook", *rest.split()[:1],
                       root, instance, *rest.split()[1:]]
            # "; exit $?" keeps the shell between hook and agent: a lone simple command
            # would be exec'd in the shell's place.
            argv = (["sh", "-c", f"{shlex.join(command)}; exit $?"] if shape == "sh"
                    else command)
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        for out in child.stdout:
            print(out.rstrip("\n"), flush=True)
        print(f"done {child.wait()}", flush=True)


def reaper(root: str, instance: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, b"tini", 0, 0, 0)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    orphan = shlex.join([sys.executable, os.path.abspath(__file__), "orphan", root, instance,
                         str(os.getpid())])
    subprocess.run(["sh", "-c", f"{orphan} & exit 0"], check=True)
    os.wait()  # the orphaned hook, re-parented to this process


def orphan(root: str, instance: str, reaper_pid: str) -> None:
    deadline = time.monotonic() + 30
    while os.getppid() != int(reaper_pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the shell that started it has exited
    try:
        result = start_agent_session(HeartbeatRegistry(root), instance)
    except AgentUnresolved as exc:
        print(json.dumps({"unresolved": exc.reason}), flush=True)
        return
    print(json.dumps(msgspec.structs.asdict(result)), flush=True)


if __name__ == "__main__":
    {"agent": agent, "hook": hook, "reaper": reaper, "orphan": orphan}[sys.argv[1]](
        *sys.argv[2:])
