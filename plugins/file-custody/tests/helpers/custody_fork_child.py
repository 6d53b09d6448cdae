"""A session that starts a child process, for tests that then SIGKILL the session.

Usage: custody_fork_child.py <registry> <instance> fork|forkserver|spawn|subprocess
       custody_fork_child.py <registry> <instance> fork-then-close

The first form starts a session of <instance>, starts one long-lived child by
that method, prints ``ready <child pid>`` and sleeps until killed. The second
forks inside the session; the child closes its copy of the session and tries a
write; the parent prints one JSON object of what survived.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from typing import Any

from hostcore_file_custody import CustodyRefused, HeartbeatRegistry


def sleep_forever(started: Any) -> None:
    started.set()
    time.sleep(600)


def start_child(method: str) -> int:
    """Start the child and return its pid once it runs its own code.

    ``start()`` returns as soon as the child exists; until the child gets the CPU,
    its at-fork handlers (which drop the inherited session lock) have not run. A
    machine under load can keep it waiting, so the child says when it runs.
    """
    if method == "subprocess":
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid
    context = multiprocessing.get_context(method)
    started = context.Event()
    process = context.Process(target=sleep_forever, args=(started,), daemon=False)
    process.start()
    if not started.wait(60):
        raise SystemExit("the child never started")
    assert process.pid is not None
    return process.pid


def hold(registry: HeartbeatRegistry, instance: str, method: str) -> None:
    session = registry.start_session(instance, prompt_hash="p")
    pid = start_child(method)
    print(f"ready {pid}", flush=True)
    time.sleep(600)
    session.close()


def fork_then_close(registry: HeartbeatRegistry, instance: str) -> None:
    with registry.start_session(instance, prompt_hash="p") as session:
        child = os.fork()
        if child == 0:
            session.close()  # the child's copy: must leave the parent's session alone
            try:
                session.refresh()
                code = 1
            except CustodyRefused:
                code = 0
            os._exit(code)
        _, status = os.waitpid(child, 0)
        record = registry.read_generation(instance)
        seen = {"child_exit": os.waitstatus_to_exitcode(status),
                "heartbeat_kept": registry.heartbeat_path(instance).exists(),
                "generation_status": record.status if record else None,
                "parent_can_refresh": session.refresh().seq}
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    root, instance, method = sys.argv[1:4]
    registry = HeartbeatRegistry(root)
    if method == "fork-then-close":
        fork_then_close(registry, instance)
    else:
        hold(registry, instance, method)
