"""Running a scenario where the operating system really refuses: as an unprivileged
user (mode 000 denies only then), or in a mount namespace of its own (to mount a
tiny tmpfs). Each helper skips, saying why, only when that is impossible here; a
missing ``unshare`` fails instead where CI requires every tool
(``HOSTCORE_REQUIRED_TOOLS``). And :func:`kill_at`, the SIGKILL at a named step."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hostcore.testing import require_tool

HELPERS = Path(__file__).parent / "helpers"
FAULT_CHILD = HELPERS / "custody_fault_child.py"
KILL_CHILD = HELPERS / "custody_kill_child.py"


def kill_at(*args: str) -> str:
    """Run the kill child (``helpers/custody_kill_child.py`` with ``args``) until it
    reports the step it paused at, SIGKILL it, reap it; returns the line it reported."""
    child = subprocess.Popen([sys.executable, str(KILL_CHILD), *args], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL, line  # killed there, not gone before
    return line


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no 'nobody' user to drop privileges to")


@contextmanager
def shared_folder() -> Iterator[tuple[Path, list[str]]]:
    """A folder an unprivileged child can write, and the child's arguments to drop to it.

    As root: a fresh folder under the system temp folder owned by ``nobody``, and
    ``--drop-to uid:gid`` (the child drops privileges itself, once its interpreter
    and modules are loaded: the interpreter may live where ``nobody`` cannot read);
    otherwise a temp folder of ours and no arguments (mode 000 denies us already).
    """
    folder = Path(tempfile.mkdtemp(prefix="custody-fault-"))
    drop: list[str] = []
    try:
        if os.geteuid() == 0:
            user = _unprivileged_user()
            os.chown(folder, user.pw_uid, user.pw_gid)
            os.chmod(folder, 0o700)
            drop = ["--drop-to", f"{user.pw_uid}:{user.pw_gid}"]
        yield folder, drop
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def run_unprivileged(scenario: str, prepare: Callable[[Path], None] | None = None,
                     ) -> dict[str, object]:
    """Run a fault scenario as a user that mode 000 really denies; ``prepare(folder)``
    runs first, with this process's privileges."""
    with shared_folder() as (folder, drop):
        if prepare is not None:
            prepare(folder)
        result = subprocess.run([sys.executable, str(FAULT_CHILD), scenario, str(folder), *drop],
                                capture_output=True, text=True, timeout=120, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def unshare_prefix(*namespaces: str) -> list[str]:
    """The ``unshare`` command that enters new ``namespaces`` here, or a skip saying why."""
    require_tool("unshare", "Debian: apt-get install util-linux")
    tool = shutil.which("unshare")
    assert tool is not None
    attempts = [[tool, *namespaces]]
    if os.geteuid() != 0:
        attempts = [[tool, "--user", "--map-root-user", *namespaces]]
    for prefix in attempts:
        probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return prefix
        reason = probe.stderr.strip()
    pytest.skip(f"unshare {' '.join(namespaces)} is not permitted here: {reason}")


def run_in_mount_namespace(scenario: str, tmp_path: Path) -> dict[str, object]:
    """Run a fault scenario in a mount namespace of its own (it mounts a tmpfs)."""
    prefix = unshare_prefix("--mount", "--propagation", "private")
    result = subprocess.run([*prefix, sys.executable, str(FAULT_CHILD), scenario, str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
