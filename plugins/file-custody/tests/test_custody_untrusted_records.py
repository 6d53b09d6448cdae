"""Every record custody reads is untrusted input: hostile manifests, runaway files, a
registry root that is (or becomes) a symlink, folders others may write, and what a
crashed session leaves behind. Each attack runs against real processes: a deleter or
sweeper killed or paused at a step, and ``hostcore`` itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import HeartbeatRegistry, StaleSweep
from hostcore_file_custody.private import DeletionManifest

from hostcore.files import atomic_write

HELPERS = Path(__file__).parent / "helpers"
KILL_CHILD = HELPERS / "custody_kill_child.py"
SESSION_CHILD = HELPERS / "custody_session_child.py"
ENV = {**os.environ, "HOSTCORE_LOAD_PLUGINS": "hostcore-file-custody"}
DATA = b"the stale heartbeat's exact bytes"
MIB = 1024 * 1024
HOUR = 3600.0
DAY = 24 * HOUR
NAMES = ("alpha", "beta", "gamma")
# Runs hostcore and reports the process's own peak memory on stderr's last line:
# VmHWM, not ru_maxrss, which Linux carries over from the parent across fork and exec
# (a pytest worker grown to 355 MiB made every child "peak" there).
MEASURED = ("import runpy, sys\n"
            "sys.argv = ['hostcore', *sys.argv[1:]]\n"
            "try:\n"
            "    runpy.run_module('hostcore', run_name='__main__')\n"
            "finally:\n"
            "    with open('/proc/self/status') as status:\n"
            "        kib = next(line.split()[1] for line in status\n"
            "                   if line.startswith('VmHWM:'))\n"
            "    print(f'peak-kib {kib}', file=sys.stderr)\n")


def hostcore(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=180, env=ENV)


def measured(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``hostcore`` run with its peak resident memory, in MiB."""
    result = subprocess.run([sys.executable, "-c", MEASURED, "--root", str(root), *args],
                            capture_output=True, text=True, timeout=180, env=ENV)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("peak-kib "), result.stderr[-2000:]
    return result, int(last.split()[1]) / 1024


def cli_registry(root: Path) -> HeartbeatRegistry:
    """The registry a host at ``root`` sweeps by default."""
    return HeartbeatRegistry(root / "plugins" / "file-custody" / "registry").ensure()


def configure(root: Path, directory: Path) -> None:
    root.mkdir(exist_ok=True)
    (root / "hostcore.toml").write_text(f'[plugins.file-custody]\ndirectory = "{directory}"\n')


def interrupted_deletion(registry: HeartbeatRegistry,
                         kill_at: Callable[..., str]) -> tuple[Path, Path, Path]:
    """alpha's heartbeat pinned by a deleter killed right after the pin:
    (heartbeat path, manifest, pin)."""
    path = registry.heartbeat_path("alpha")
    atomic_write(path, DATA)
    assert kill_at("delete", str(path), "pinned", "yes") == "paused pinned"
    private = registry.heartbeats_dir / ".custody"
    names = sorted(n for n in os.listdir(private) if not n.startswith("."))
    manifest = next(private / n for n in names if n.endswith(".json"))
    pin = next(private / n for n in names if n.endswith(".pin"))
    return path, manifest, pin


def cache_files(registry: HeartbeatRegistry) -> dict[str, bytes]:
    """Every file of the three cache folders, by relative path, with its bytes."""
    found = {}
    for folder in registry.cache_dirs.values():
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                found[str(path.relative_to(registry.root))] = path.read_bytes()
    return found


def session_child(mode: str, registry: HeartbeatRegistry,
                  instance: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, str(SESSION_CHILD), mode, str(registry.root),
                              instance], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)


def later(seconds: float) -> Callable[[], float]:
    """A sweep clock ``seconds`` ahead of now."""
    return lambda: time.time() + seconds


# -- names read from a manifest ----------------------------------------------------------


@pytest.mark.parametrize("hostile", ["parent", "absolute"])
def test_a_manifest_whose_source_name_is_a_path_is_kept_and_nothing_is_written_outside(
        tmp_path, hostile, kill_at):
    root = tmp_path / "root"
    registry = cli_registry(root)
    _path, manifest_path, pin = interrupted_deletion(registry, kill_at)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = registry.root / "escaped.json" if hostile == "parent" \
        else elsewhere / "escaped.json"
    name = "../escaped.json" if hostile == "parent" else str(outside)
    manifest = msgspec.json.decode(manifest_path.read_bytes(), type=DeletionManifest)
    atomic_write(manifest_path, msgspec.json.encode(
        msgspec.structs.replace(manifest, source_name=name)))

    result = hostcore(root, "custody", "recover", "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(r["folder"], r["outcome"], r["source_path"]) for r in report["results"]] == [
        ("heartbeats", "kept-malformed", None)]
    assert "not a plain file name" in report["results"][0]["reason"]
    assert not outside.exists() and sorted(os.listdir(elsewhere)) == []
    assert pin.read_bytes() == DATA and manifest_path.exists()
    status = json.loads(hostcore(root, "custody", "status", "--json").stdout)
    # Its source unknown, the pinned bytes protect their whole folder.
    assert status["counts"]["malformed_manifests"] == 1
    assert status["counts"]["protected_folders"] == 1


def test_an_owner_lock_path_naming_a_fifo_is_never_opened(registry, kit, tmp_path):
    fifo = tmp_path / "not-a-lock"
    os.mkfifo(fifo)
    # A reader blocks in open() until someone opens the FIFO for writing.
    reader = subprocess.Popen([sys.executable, "-c",
                               "import os, sys; os.open(sys.argv[1], os.O_RDONLY); print('opened')",
                               str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        kit.plant_stale(registry, "alpha")
        heartbeat = registry.read_heartbeat("alpha")
        assert heartbeat is not None
        # A PID that proves nothing (no start time), and a "lock" that is a FIFO.
        owner = msgspec.structs.replace(heartbeat.owner, pid=os.getppid(), start_ticks=None,
                                        lock=str(fifo))
        registry.write_heartbeat(msgspec.structs.replace(heartbeat, owner=owner))
        kit.age(registry.heartbeat_path("alpha"))

        report = StaleSweep(registry).run()

        assert report.kept_uncertain == 1 and registry.heartbeat_path("alpha").exists()
        time.sleep(0.5)
        assert reader.poll() is None, "the sweep opened the FIFO named as an owner's lock"
    finally:
        reader.kill()
        reader.wait(timeout=30)


# -- size caps -------------------------------------------------------------------------


def test_a_300_mib_manifest_is_refused_unread_counted_and_kept(tmp_path, kill_at):
    root = tmp_path / "root"
    registry = cli_registry(root)
    path, manifest_path, pin = interrupted_deletion(registry, kill_at)
    with open(manifest_path, "r+b") as manifest:
        manifest.truncate(300 * MIB)  # sparse: costs the disk nothing

    result, peak_mib = measured(root, "custody", "recover", "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [r["outcome"] for r in report["results"]] == ["kept-oversized"]
    assert report["counts"]["kept_oversized"] == 1
    assert peak_mib < 150, f"recovery peaked at {peak_mib:.0f} MiB"
    assert os.path.getsize(manifest_path) == 300 * MIB and pin.read_bytes() == DATA
    assert not path.exists()

    tick = hostcore(root, "run", "--once")
    assert tick.returncode == 1 and "file-custody" in tick.stderr, tick.stderr
    status = json.loads(hostcore(root, "custody", "status", "--json").stdout)
    assert status["counts"]["oversized"] >= 1
    assert status["folders"]["heartbeats"]["oversized"] == 1
    assert pin.read_bytes() == DATA


def test_a_300_mib_heartbeat_is_kept_unread_and_fails_the_step(tmp_path, kit):
    root = tmp_path / "root"
    registry = cli_registry(root)
    kit.plant_stale(registry, "alpha")
    huge = registry.heartbeat_path("alpha")
    with open(huge, "r+b") as heartbeat:
        heartbeat.truncate(300 * MIB)
    kit.age(huge)
    kit.plant_stale(registry, "beta")  # an ordinary dead session beside it

    tick, peak_mib = measured(root, "run", "--once")

    assert tick.returncode == 1 and "file-custody" in tick.stderr, tick.stderr
    assert peak_mib < 150, f"the sweep peaked at {peak_mib:.0f} MiB"
    assert os.path.getsize(huge) == 300 * MIB  # kept: no judgement rests on it
    assert not registry.heartbeat_path("beta").exists()  # the fault stopped nothing else
    status = json.loads(hostcore(root, "custody", "status", "--json").stdout)
    assert status["last_sweep"]["counts"]["oversized"] == 1
    assert status["last_sweep"]["counts"]["deleted"] == 1


# -- the registry root -----------------------------------------------------------------


def test_a_registry_root_that_is_a_symlink_is_refused_and_what_it_names_untouched(tmp_path,
                                                                                   kit):
    other = HeartbeatRegistry(tmp_path / "other").ensure()
    for name in NAMES:
        kit.plant_stale(other, name)
    before = cache_files(other)
    link = tmp_path / "registry-link"
    link.symlink_to(other.root)
    root = tmp_path / "root"
    configure(root, link)

    tick = hostcore(root, "run", "--once")
    status = hostcore(root, "custody", "status", "--json")
    recover = hostcore(root, "custody", "recover")

    assert tick.returncode == 1 and "file-custody" in tick.stderr, tick.stderr
    assert cache_files(other) == before
    assert status.returncode == 2 and "symlink" in status.stderr
    report = json.loads(status.stdout)
    assert report["counts"]["refused"] == 1 and str(link) in report["refused"]
    assert report["counts"]["heartbeats"] == 0  # nothing behind the link was read
    assert recover.returncode == 2 and str(link) in recover.stderr
    assert cache_files(other) == before
    # The same registry, configured as itself, is swept: the sessions were sweepable.
    configure(root, other.root)
    assert hostcore(root, "run", "--once").returncode == 0
    assert not any(other.heartbeat_path(name).exists() for name in NAMES)


def test_a_registry_root_swapped_for_a_symlink_mid_sweep_deletes_nothing_outside_it(tmp_path,
                                                                                     kit):
    registry = HeartbeatRegistry(tmp_path / "registry").ensure()
    other = HeartbeatRegistry(tmp_path / "other").ensure()
    for name in NAMES:  # the same instance names in both: a path-following sweep would match
        kit.plant_stale(registry, name)
        kit.plant_stale(other, name)
    before = cache_files(other)
    sweeper = subprocess.Popen([sys.executable, str(KILL_CHILD), "sweep", str(registry.root),
                                "after_snapshot", "3"], stdout=subprocess.PIPE, text=True)
    assert sweeper.stdout is not None
    assert sweeper.stdout.readline().strip() == "paused after_snapshot"
    os.rename(registry.root, tmp_path / "registry.moved")
    registry.root.symlink_to(other.root)

    out, _ = sweeper.communicate(timeout=120)

    assert sweeper.returncode == 0 and out.strip() == "done 0"
    assert cache_files(other) == before
    assert sorted(os.listdir(other.locks_dir)) == []  # no lock file made or dropped there


@pytest.mark.parametrize("folder", ["", "heartbeats", "pid-map", "locks"])
def test_a_world_writable_registry_folder_is_refused_and_reported(tmp_path, kit, folder):
    root = tmp_path / "root"
    registry = cli_registry(root)
    kit.plant_stale(registry, "alpha")
    before = cache_files(registry)
    target = registry.root / folder if folder else registry.root
    os.chmod(target, 0o777)

    tick = hostcore(root, "run", "--once")
    status = hostcore(root, "custody", "status", "--json")
    overall = hostcore(root, "status", "--json")

    assert tick.returncode == 1 and "file-custody" in tick.stderr, tick.stderr
    assert cache_files(registry) == before
    assert status.returncode == 2 and f"chmod o-w {target}" in status.stderr
    assert "writable by every user" in json.loads(status.stdout)["refused"]
    assert json.loads(overall.stdout)["components"]["worker"]["file-custody"]["refused"] == 1
    os.chmod(target, 0o755)
    assert hostcore(root, "run", "--once").returncode == 0
    assert not registry.heartbeat_path("alpha").exists()


def test_a_registry_made_under_an_open_umask_is_still_owner_only_and_swept(tmp_path, kit):
    previous = os.umask(0)
    try:
        registry = HeartbeatRegistry(tmp_path / "made" / "registry").ensure()
    finally:
        os.umask(previous)
    assert os.stat(registry.root).st_mode & 0o077 == 0
    kit.plant_stale(registry, "alpha")
    assert StaleSweep(registry).run().deleted == 1


def test_a_registry_owned_by_another_user_is_refused(tmp_path, kit):
    root = tmp_path / "root"
    if os.geteuid() == 0:
        registry = cli_registry(root)
        kit.plant_stale(registry, "alpha")
        before = cache_files(registry)
        os.chown(registry.root, 65534, 65534)  # nobody
        refused_folder = registry.root
    else:
        refused_folder = Path("/")  # root's: another user's, for us
        configure(root, refused_folder)

    tick = hostcore(root, "run", "--once")
    status = hostcore(root, "custody", "status", "--json")

    assert tick.returncode == 1 and "file-custody" in tick.stderr, tick.stderr
    assert status.returncode == 2 and "owned by uid" in status.stderr
    assert str(refused_folder) in json.loads(status.stdout)["refused"]
    if os.geteuid() == 0:
        assert cache_files(registry) == before


# -- what crashed sessions leave ---------------------------------------------------------


def test_a_crashed_sessions_live_record_and_lock_file_are_cleaned_by_the_sweep(registry):
    child = session_child("session", registry, "alpha")
    kill(child)
    leftovers = [registry.heartbeat_path("alpha"), registry.pid_map_path(child.pid),
                 registry.prompt_hash_path("alpha"), registry.generation_path("alpha"),
                 registry.lock_path("alpha")]
    assert all(path.exists() for path in leftovers)

    first = StaleSweep(registry, clock=later(HOUR)).run()

    assert first.deleted == 1 and first.dependents_deleted == 2
    # Within the retention the record stays: a successor may still resume its generation.
    record = registry.read_generation("alpha")
    assert record is not None and record.status == "live"

    week_later = StaleSweep(registry, clock=later(8 * DAY)).run()

    assert week_later.generations_pruned == 1
    assert not any(path.exists() for path in leftovers)


def test_a_live_record_whose_owner_holds_its_lock_is_kept_past_the_retention(registry):
    holder = session_child("custody", registry, "alpha")
    try:
        from hostcore_file_custody import GenerationRecord

        registry.write_generation(GenerationRecord(
            instance="alpha", generation_id="gen_alive", status="live", epoch=1,
            changed_at=time.time()))
        report = StaleSweep(registry, clock=later(8 * DAY)).run()
        assert report.generations_pruned == 0 and report.locks_pruned == 0
        assert registry.generation_path("alpha").exists()
        assert registry.lock_path("alpha").exists()
    finally:
        kill(holder)
    # Once its holder died, the same sweep proves it and cleans both.
    report = StaleSweep(registry, clock=later(8 * DAY)).run()
    assert report.generations_pruned == 1
    assert not registry.generation_path("alpha").exists()
    assert not registry.lock_path("alpha").exists()


def test_a_dead_writers_lock_file_is_pruned_and_a_live_ones_kept(registry):
    writer = session_child("custody", registry, "alpha")
    try:
        kept = StaleSweep(registry, clock=later(HOUR)).run()
        assert kept.locks_pruned == 0 and registry.lock_path("alpha").exists()
    finally:
        kill(writer)
    fresh = StaleSweep(registry).run()  # not past the stale window yet: not even tried
    assert fresh.locks_pruned == 0 and fresh.lock_acquisitions == 0

    report = StaleSweep(registry, clock=later(HOUR)).run()

    assert report.locks_pruned == 1 and report.lock_acquisitions == 1
    assert sorted(os.listdir(registry.locks_dir)) == []


# -- the two guards that keep live files -------------------------------------------------


def test_recovery_never_completes_the_deletion_of_a_pin_that_is_not_the_expected_revision(
        tmp_path, kill_at):
    root = tmp_path / "root"
    registry = cli_registry(root)
    path, _manifest, pin = interrupted_deletion(registry, kill_at)
    with open(pin, "r+b") as pinned:  # other bytes now sit at the pin (same inode)
        pinned.write(b"X")
    changed = pin.read_bytes()
    # Something newer at the source: recovery's rule would let a true pin's deletion complete.
    atomic_write(path, b"a newer heartbeat")

    result = hostcore(root, "custody", "recover", "--json")

    assert result.returncode == 0, result.stderr
    outcomes = [r["outcome"] for r in json.loads(result.stdout)["results"]]
    assert outcomes == ["retained"]  # it could not go back over the newer file: kept
    assert pin.read_bytes() == changed and path.read_bytes() == b"a newer heartbeat"


def test_the_sweep_keeps_a_pid_map_entry_that_names_another_instance(registry, kit):
    beta = session_child("session", registry, "beta")
    try:
        entry = registry.pid_map_path(beta.pid)
        betas = entry.read_bytes()
        # alpha died long ago with the PID the kernel has since given to beta's process.
        kit.plant_stale(registry, "alpha", pid=beta.pid)
        atomic_write(entry, betas)

        report = StaleSweep(registry).run()

        assert report.deleted == 1 and not registry.heartbeat_path("alpha").exists()
        assert entry.read_bytes() == betas
        assert registry.heartbeat_path("beta").exists()
    finally:
        kill(beta)
