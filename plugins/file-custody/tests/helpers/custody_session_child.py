"""A session (or a standalone writer's custody) that lives until its parent kills it.

Usage: custody_session_child.py session <registry> <instance>
       custody_session_child.py custody <registry> <instance>

``session`` starts a session of ``instance`` (lock, generation record, heartbeat,
pid-map entry, prompt hash); ``custody`` only takes the instance's custody, as a
writer does before its first write. Either prints ``ready`` and sleeps: a SIGKILL
then leaves exactly what a crash at that point leaves.
"""

from __future__ import annotations

import sys
import time

from hostcore_file_custody import HeartbeatRegistry


def main(mode: str, root: str, instance: str) -> None:
    registry = HeartbeatRegistry(root).ensure()
    if mode == "session":
        held = registry.start_session(instance, prompt_hash="digest")
    else:
        held = registry.with_generation_custody(instance)
        held.__enter__()
    print("ready", flush=True)
    time.sleep(600)
    del held


if __name__ == "__main__":
    main(*sys.argv[1:])
