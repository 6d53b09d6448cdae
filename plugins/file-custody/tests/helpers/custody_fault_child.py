"""Fault scenarios that need a real operating-system refusal, run in a child process.

Usage: custody_fault_child.py <scenario> <folder> [--drop-to UID:GID]

The parent runs this as an unprivileged user (so mode 000 really denies: with
``--drop-to`` a root child becomes that user once its modules are loaded) or in
a mount namespace of its own (so a tiny tmpfs really runs out of inodes). Each
scenario prints one JSON object with what it observed, for the parent to assert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hostcore_file_custody import (
    FileAccessError,
    HeartbeatRegistry,
    StaleSweep,
    capture_file_revision,
    current_owner,
    delete_file_if_unchanged,
    file_revision_matches,
)
from hostcore_file_custody.status import custody_status
from hostcore_file_custody.testing import plant_stale, private_entries


def _leftovers(folder: Path) -> list[str]:
    private = folder / ".custody"
    return sorted(os.listdir(private)) if private.exists() else []


def unreadable_file(folder: Path) -> dict[str, object]:
    """Mode-000 files against each primitive."""
    path = folder / "cache" / "alpha.json"
    path.parent.mkdir()
    path.write_bytes(b"heartbeat")
    readable = capture_file_revision(path)
    assert readable is not None
    os.chmod(path, 0o000)
    out: dict[str, object] = {}
    try:
        capture_file_revision(path)
        out["capture"] = "returned"
    except FileAccessError as exc:
        out["capture"] = f"FileAccessError {exc.errno}"
    out["matches"] = file_revision_matches(path, readable)
    # The file turns unreadable between the identity check and the pin: the pin
    # cannot be read, so it must go back and nothing may be left behind.
    os.chmod(path, 0o600)
    revision = capture_file_revision(path)
    assert revision is not None

    def lock_out(step: str) -> None:
        if step == "intent-recorded":
            os.chmod(path, 0o000)

    result = delete_file_if_unchanged(path, revision, lambda pinned: True, on_step=lock_out)
    out["delete"] = [result.outcome, result.reason]
    out["back_at_path"] = path.exists()
    out["leftovers"] = _leftovers(path.parent)
    # A folder that cannot be entered at all: kept, with nothing made.
    os.chmod(path, 0o600)
    revision = capture_file_revision(path)
    os.chmod(path.parent, 0o000)
    try:
        assert revision is not None
        blocked = delete_file_if_unchanged(path, revision, lambda pinned: True)
    finally:
        os.chmod(path.parent, 0o700)
    out["delete_in_closed_folder"] = blocked.outcome
    return out


def unreadable_sweep(folder: Path) -> dict[str, object]:
    """One mode-000 heartbeat and one mode-000 pid-map entry among stale sessions."""
    registry = HeartbeatRegistry(folder / "registry").ensure()
    planted = {name: plant_stale(registry, name) for name in ("a-bad", "b-good", "c-good")}
    os.chmod(registry.heartbeat_path("a-bad"), 0o000)
    orphan = plant_stale(registry, "d-orphan")
    registry.heartbeat_path("d-orphan").unlink()
    os.chmod(registry.pid_map_path(orphan.pid), 0o000)
    report = StaleSweep(registry).run()
    status = custody_status(registry)
    return {
        "unhandled": report.unhandled,
        "deleted": report.deleted,
        "remaining": sorted(p.name for p in registry.heartbeats_dir.iterdir()
                            if not p.name.startswith(".")),
        "good_dependents_left": [registry.pid_map_path(planted[n].pid).exists()
                                 for n in ("b-good", "c-good")],
        "status_unhandled": status["counts"]["unhandled"],
        "pins": sum(len(private_entries(f)) for f in registry.cache_dirs.values()),
    }


def other_users_file(folder: Path) -> dict[str, object]:
    """A deletion refused by validation, of a file another user owns, which protected
    hard links forbid us to link back: the live path must not end up empty."""
    path = folder / "cache" / "alpha.json"
    revision = capture_file_revision(path)
    assert revision is not None
    try:
        os.link(path, folder / "cache" / "probe-link")
        linkable = True
    except OSError:
        linkable = False
    result = delete_file_if_unchanged(path, revision, lambda pinned: False)
    return {"linkable": linkable, "outcome": result.outcome,
            "back": path.read_bytes().decode() if path.exists() else None,
            "leftovers": _leftovers(path.parent)}


def _fill_inodes(folder: Path) -> list[Path]:
    filler = folder / "filler"
    filler.mkdir(exist_ok=True)
    made = []
    while True:
        path = filler / f"f{len(made)}"
        try:
            path.touch()
        except OSError:
            return made
        made.append(path)


def no_space(folder: Path) -> dict[str, object]:
    """ENOSPC on a tmpfs with a few inodes: primitives and the sweep keep their contracts."""
    mount = folder / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=96,mode=0700", "tmpfs",
                    str(mount)], check=True)
    registry = HeartbeatRegistry(mount / "registry").ensure()
    # One deletion while there is room, so the put-back probe is done.
    plant_stale(registry, "a")
    first = StaleSweep(registry).run()
    for name in ("b", "c"):
        plant_stale(registry, name)
        registry.lock_path(name).touch()  # crashed sessions leave their lock files
    fillers = _fill_inodes(mount)
    path = registry.heartbeat_path("b")
    revision = capture_file_revision(path)
    assert revision is not None
    single = delete_file_if_unchanged(path, revision, lambda pinned: True)
    out: dict[str, object] = {
        "first_deleted": first.deleted,
        "delete": [single.outcome, single.reason],
        "leftovers_after_delete": _leftovers(registry.heartbeats_dir),
    }
    report = StaleSweep(registry).run()
    out["sweep"] = {"unhandled": report.unhandled, "deleted": report.deleted,
                    "kept_refused": report.kept_refused}
    out["intact"] = [registry.heartbeat_path(n).exists() for n in ("b", "c")]
    out["leftovers_after_sweep"] = [len(private_entries(f)) for f in registry.cache_dirs.values()]
    for filler in fillers:
        filler.unlink()
    out["after_space_returns"] = StaleSweep(registry).run().deleted
    subprocess.run(["umount", str(mount)], check=True)
    return out


def drop_privileges(ids: str) -> None:
    # Load now what is read lazily (codecs, this host's identity): the interpreter's
    # own files may be where the unprivileged user cannot read.
    current_owner()
    uid, gid = (int(part) for part in ids.split(":"))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    assert os.geteuid() == uid != 0


if __name__ == "__main__":
    scenario, where = sys.argv[1], Path(sys.argv[2])
    if sys.argv[3:5] and sys.argv[3] == "--drop-to":
        drop_privileges(sys.argv[4])
    result = {"unreadable-file": unreadable_file, "unreadable-sweep": unreadable_sweep,
              "no-space": no_space, "other-users-file": other_users_file}[scenario](where)
    print(json.dumps(result), flush=True)
