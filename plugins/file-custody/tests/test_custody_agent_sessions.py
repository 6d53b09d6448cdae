"""Agent-owned sessions with real processes: a stand-in agent (a Python process) runs
short-lived hooks through ``sh`` (Claude Code's shape) or directly (Codex's), and the
session they start belongs to the agent: live while it runs, dead once it is killed,
ended (and swept with no liveness probe) after its end."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from hostcore_file_custody import LOCKS, HeartbeatRegistry, StaleSweep
from hostcore_file_custody.agent import RUNNER_COMMANDS
from hostcore_file_custody.agent_sessions import (
    end_agent_session,
    refresh_agent_session,
    start_agent_session,
)
from hostcore_file_custody.errors import CustodyRefused
from hostcore_file_custody.owner import OwnerRecord, current_host, process_start_ticks
from hostcore_file_custody.registry import (
    GenerationRecord,
    Heartbeat,
    PidMapEntry,
    new_generation_id,
)
from hostcore_file_custody.sessions import list_sessions

CHILD = Path(__file__).parent / "helpers" / "custody_agent_child.py"
WAIT = 60.0


class Agent:
    """The stand-in agent process; each hook it runs is a process of its own."""

    def __init__(self, registry: HeartbeatRegistry, instance: str) -> None:
        self.instance = instance
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), "agent", str(registry.root), instance],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        word, pid = self._next().split()
        assert word == "ready"
        self.pid = int(pid)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def _next(self) -> str:
        return self.lines.get(timeout=WAIT)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def finish(self) -> tuple[list[str], int]:
        out = []
        while not (line := self._next()).startswith("done "):
            out.append(line)
        return out, int(line.split()[1])

    def hook(self, action: str, shape: str = "sh") -> dict[str, object]:
        self.send(f"{shape} {action}")
        out, status = self.finish()
        assert status == 0, out
        return json.loads(out[-1])  # type: ignore[no-any-return]

    def hook_killed_at(self, action: str, step: str) -> None:
        """Run a hook that pauses at ``step``, SIGKILL it there, and wait for the agent."""
        self.send(f"sh {action} {step}")
        word, paused, pid = self._next().split()
        assert (word, paused) == ("paused", step)
        os.kill(int(pid), signal.SIGKILL)
        _, status = self.finish()
        assert status == 128 + signal.SIGKILL  # the shell reports its killed child

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=WAIT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def agents(registry):
    started: list[Agent] = []

    def start(instance: str) -> Agent:
        started.append(Agent(registry, instance))
        return started[-1]

    yield start
    for agent in started:
        agent.close()


def _age_session(registry: HeartbeatRegistry, kit, instance: str, pid: int) -> None:
    for path in (registry.heartbeat_path(instance), registry.pid_map_path(pid)):
        if path.exists():
            kit.age(path)


def _session(registry: HeartbeatRegistry, instance: str):
    return next(s for s in list_sessions(registry).sessions if s.instance == instance)


def test_a_session_a_hook_starts_through_sh_is_owned_by_the_agent_and_outlives_the_hook(
        registry, agents, kit):
    agent = agents("alpha")
    result = agent.hook("start")
    assert result["outcome"] == "started" and result["via"] == "sh"
    assert result["owner_pid"] == agent.pid

    heartbeat = registry.read_heartbeat("alpha")
    assert heartbeat.owner_kind == "agent" and heartbeat.version == 2
    assert heartbeat.owner.pid == agent.pid
    assert heartbeat.owner.start_ticks == process_start_ticks(agent.pid)
    assert heartbeat.owner.lock is None  # the hook is gone: it holds nothing
    # Ten minutes on, the hook long dead: the sweep keeps the session of the live agent.
    _age_session(registry, kit, "alpha", agent.pid)
    report = StaleSweep(registry).run()
    assert report.candidates == 1 and report.kept_live == 1 and report.deleted == 0
    assert registry.heartbeat_present("alpha")
    assert registry.read_pid_map(agent.pid).instance == "alpha"
    view = _session(registry, "alpha")
    assert (view.state, view.owner_pid, view.owner_kind, view.liveness) == \
        ("live", agent.pid, "agent", "live")


def test_a_hook_the_agent_runs_directly_is_owned_by_the_agent(registry, agents):
    agent = agents("alpha")
    result = agent.hook("start", shape="direct")
    assert result["via"] != "sh" and result["owner_pid"] == agent.pid


def test_after_the_agent_is_sigkilled_its_session_is_dead_by_pid_and_start_time_and_swept(
        registry, agents, kit):
    agent = agents("alpha")
    generation = agent.hook("start")["generation_id"]
    agent.kill()  # no SessionEnd
    assert _session(registry, "alpha").liveness == "dead"
    _age_session(registry, kit, "alpha", agent.pid)

    report = StaleSweep(registry).run()

    assert report.deleted == 1 and report.dependents_deleted == 1
    assert not registry.heartbeat_present("alpha")
    assert not registry.pid_map_path(agent.pid).exists()
    assert kit.observations(registry) == [generation]


def test_an_ended_session_is_swept_at_the_next_sweep_without_a_liveness_probe(
        registry, agents, kit):
    agent = agents("alpha")
    generation = agent.hook("start")["generation_id"]
    ended = agent.hook("end")
    assert (ended["outcome"], ended["generation_id"]) == ("ended", generation)
    assert registry.read_generation("alpha").status == "terminal"
    assert registry.read_heartbeat("alpha").ended_at is not None
    assert _session(registry, "alpha").state == "ended"

    # The agent still runs: a probe would prove it alive and keep the heartbeat.
    report = StaleSweep(registry).run()

    assert report.deleted == 1 and report.kept_live == 0
    assert not registry.heartbeat_present("alpha")
    assert not registry.pid_map_path(agent.pid).exists()
    assert kit.diagnostics(registry) == ["terminal"] and kit.observations(registry) == []
    view = _session(registry, "alpha")  # its generation record remains, ended
    assert (view.state, view.generation, view.owner_pid) == ("ended", generation, None)


def _agent_heartbeat(registry: HeartbeatRegistry, instance: str, pid: int,
                     start_ticks: int | None) -> None:
    generation_id = new_generation_id()
    registry.write_generation(GenerationRecord(instance=instance, generation_id=generation_id,
                                               status="live", epoch=1, changed_at=0.0))
    owner = OwnerRecord(host=current_host(), pid=pid, start_ticks=start_ticks)
    registry.write_heartbeat(Heartbeat(instance=instance, generation_id=generation_id,
                                       owner=owner, version=2, owner_kind="agent"))
    registry.write_pid_map(PidMapEntry(pid=pid, instance=instance, generation_id=generation_id))


@pytest.mark.parametrize("reused", [True, False], ids=["reused-pid", "same-process"])
def test_a_pid_running_with_another_start_time_is_a_dead_agent(registry, kit, reused):
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        ticks = process_start_ticks(sleeper.pid)
        assert ticks is not None
        # A record naming this PID with another start time: the PID was reused.
        _agent_heartbeat(registry, "alpha", sleeper.pid, ticks + 1 if reused else ticks)
        _age_session(registry, kit, "alpha", sleeper.pid)
        assert _session(registry, "alpha").liveness == ("dead" if reused else "live")

        report = StaleSweep(registry).run()

        assert (report.deleted, report.kept_live) == ((1, 0) if reused else (0, 1))
        assert registry.heartbeat_present("alpha") is not reused
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_start_a_refresh_and_an_end_take_one_lock_each(registry):
    before = LOCKS.acquisitions
    start_agent_session(registry, "alpha", agent=os.getpid())
    assert LOCKS.acquisitions - before == 1
    before = LOCKS.acquisitions
    refresh_agent_session(registry, "alpha", agent=os.getpid(), interval=0.0)
    assert LOCKS.acquisitions - before == 1
    before = LOCKS.acquisitions
    end_agent_session(registry, "alpha", agent=os.getpid())
    assert LOCKS.acquisitions - before == 1


def test_a_refresh_within_the_interval_writes_nothing_and_takes_no_lock(registry):
    start_agent_session(registry, "alpha", agent=os.getpid())
    path = registry.heartbeat_path("alpha")
    before, data, locks = os.stat(path), path.read_bytes(), LOCKS.acquisitions

    result = refresh_agent_session(registry, "alpha", agent=os.getpid(), interval=60.0)

    assert (result.outcome, result.wrote) == ("unchanged", False)
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert path.read_bytes() == data and LOCKS.acquisitions == locks
    # Past the interval the same call refreshes: the test above could fail.
    refreshed = refresh_agent_session(registry, "alpha", agent=os.getpid(), interval=0.0)
    assert (refreshed.outcome, refreshed.wrote) == ("refreshed", True)
    assert registry.read_heartbeat("alpha").seq == 1


def test_two_agents_keep_two_sessions_at_once_in_one_folder(registry, agents, kit):
    first, second = agents("alpha"), agents("beta")
    first.hook("start")
    second.hook("start")
    views = {s.instance: s for s in list_sessions(registry).sessions}
    assert {(v.instance, v.owner_pid, v.state, v.liveness) for v in views.values()} == {
        ("alpha", first.pid, "live", "live"), ("beta", second.pid, "live", "live")}

    first.kill()
    for agent in (first, second):
        _age_session(registry, kit, agent.instance, agent.pid)
    report = StaleSweep(registry).run()

    assert (report.deleted, report.kept_live) == (1, 1)
    assert not registry.heartbeat_present("alpha") and registry.heartbeat_present("beta")
    assert registry.read_pid_map(second.pid).instance == "beta"


def test_a_second_start_by_the_same_agent_resumes_its_generation(registry, agents):
    agent = agents("alpha")
    first = agent.hook("start")
    again = agent.hook("start")
    assert again["outcome"] == "resumed" and again["generation_id"] == first["generation_id"]
    assert registry.read_generation("alpha").epoch == 1


def test_a_start_while_another_live_agent_owns_the_session_is_refused(registry, agents):
    agent = agents("alpha")
    generation = agent.hook("start")["generation_id"]
    with pytest.raises(CustodyRefused) as refused:
        start_agent_session(registry, "alpha", agent=os.getpid())
    assert refused.value.reason == "held"
    assert registry.read_heartbeat("alpha").owner.pid == agent.pid
    agent.kill()
    # Its owner proven dead, a new start replaces the generation.
    taken = start_agent_session(registry, "alpha", agent=os.getpid())
    assert taken.outcome == "started" and taken.generation_id != generation
    assert registry.read_generation("alpha").epoch == 2


def test_another_agents_session_is_neither_refreshed_nor_ended(registry, agents):
    agent = agents("alpha")
    agent.hook("start")
    data = registry.heartbeat_path("alpha").read_bytes()
    assert refresh_agent_session(registry, "alpha", agent=os.getpid(),
                                 interval=0.0).outcome == "other-owner"
    assert end_agent_session(registry, "alpha", agent=os.getpid()).outcome == "other-owner"
    assert registry.heartbeat_path("alpha").read_bytes() == data
    assert registry.read_generation("alpha").status == "live"


def _records_decode(registry: HeartbeatRegistry) -> None:
    """Every record left decodes whole, and no writer left a temp file."""
    for folder in (*registry.cache_dirs.values(), registry.generations_dir):
        for name in os.listdir(folder):
            assert not name.endswith(".tmp"), name
            if name.endswith(".json"):
                msgspec.json.decode((folder / name).read_bytes())


@pytest.mark.parametrize("step", ["locked", "generation-written", "heartbeat-written"])
def test_a_start_hook_killed_mid_write_loses_nothing_and_the_next_start_completes(
        registry, agents, step):
    other = agents("beta")
    kept = other.hook("start")
    agent = agents("alpha")

    agent.hook_killed_at("start", step)

    _records_decode(registry)
    with registry.with_generation_custody("alpha"):  # the kernel dropped the hook's lock
        pass
    assert registry.read_heartbeat("beta").generation_id == kept["generation_id"]
    retried = agent.hook("start")
    expected = "resumed" if step == "heartbeat-written" else "started"
    assert retried["outcome"] == expected and retried["owner_pid"] == agent.pid
    assert _session(registry, "alpha").state == "live"
    assert registry.read_pid_map(agent.pid).instance == "alpha"


def test_an_end_hook_killed_after_the_terminal_record_still_ends_the_session(
        registry, agents, kit):
    agent = agents("alpha")
    generation = agent.hook("start")["generation_id"]

    agent.hook_killed_at("end", "generation-ended")

    _records_decode(registry)
    assert registry.read_generation("alpha").status == "terminal"
    assert registry.read_heartbeat("alpha").ended_at is None  # the kill came before it
    assert _session(registry, "alpha").state == "ended"  # the record is the authority
    again = agent.hook("end")  # completes the mark the killed end left out
    assert (again["outcome"], again["wrote"]) == ("already-ended", True)
    assert StaleSweep(registry).run().deleted == 1
    assert kit.diagnostics(registry) == ["terminal"]
    assert _session(registry, "alpha").generation == generation


def test_a_refresh_hook_killed_under_the_lock_leaves_the_heartbeat_as_it_was(registry, agents):
    agent = agents("alpha")
    agent.hook("start")
    data = registry.heartbeat_path("alpha").read_bytes()

    agent.hook_killed_at("refresh", "locked")

    assert registry.heartbeat_path("alpha").read_bytes() == data
    assert agent.hook("refresh")["outcome"] == "refreshed"
    assert registry.read_heartbeat("alpha").seq == 1


def test_a_heartbeat_of_before_versions_reads_as_a_process_owned_session(registry):
    owner = OwnerRecord(host=current_host(), pid=os.getpid(),
                        start_ticks=process_start_ticks(os.getpid()))
    old = {"instance": "alpha", "generation_id": new_generation_id(),
           "owner": msgspec.to_builtins(owner), "seq": 3, "refreshed_at": 1.0, "payload": {}}
    registry.heartbeat_path("alpha").write_bytes(json.dumps(old).encode())

    heartbeat = registry.read_heartbeat("alpha")

    assert (heartbeat.version, heartbeat.owner_kind, heartbeat.ended_at) == (1, "process", None)
    view = _session(registry, "alpha")
    assert (view.owner_kind, view.state, view.liveness) == ("process", "live", "live")


def test_a_heartbeat_of_a_newer_version_is_kept_unjudged(registry, kit):
    _agent_heartbeat(registry, "alpha", kit.dead_pid(), 1)
    heartbeat = registry.read_heartbeat("alpha")
    registry.write_heartbeat(msgspec.structs.replace(heartbeat, version=3))
    kit.age(registry.heartbeat_path("alpha"))

    report = StaleSweep(registry).run()

    assert (report.deleted, report.kept_uncertain) == (0, 1)
    assert registry.heartbeat_present("alpha")


def test_a_hook_orphaned_to_an_init_system_starts_no_session(registry):
    # The reaper names itself tini and adopts the hook once the shell that started it
    # exits: the hook's agent is gone, and no owner is made up for it.
    reaper = subprocess.run([sys.executable, str(CHILD), "reaper", str(registry.root),
                             "alpha"], capture_output=True, text=True, timeout=WAIT)
    assert reaper.returncode == 0, reaper.stderr
    assert json.loads(reaper.stdout) == {"unresolved": "orphaned"}
    assert not registry.heartbeat_present("alpha")
    assert registry.read_generation("alpha") is None


def test_the_agent_of_this_process_is_its_nearest_ancestor_not_a_shell():
    # Walking up from a child of a shell run by this process skips the shell.
    shell = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c 'from hostcore_file_custody.agent import "
                     f"find_agent; print(find_agent().pid)'; exit $?"],
        capture_output=True, text=True, timeout=WAIT, check=True)
    assert int(shell.stdout) == os.getpid()
    assert "sh" in RUNNER_COMMANDS and "node" not in RUNNER_COMMANDS


# -- driven by `hostcore hook`, as the agents run it ------------------------------------

HOSTCORE = Path(sys.executable).with_name("hostcore")
SESSION_ID = "3f2a9c1e-7d4b-4e8a-9b1c-0a5e6f7d8c9b"


def _hook_line(root: Path, payload_dir: Path, name: str, session_id: str = SESSION_ID,
               **fields: object) -> str:
    payload = payload_dir / f"{name}-{len(os.listdir(payload_dir))}.json"
    payload.write_text(json.dumps({"hook_event_name": name, "session_id": session_id,
                                   "cwd": str(payload_dir), "transcript_path": None,
                                   **fields}))
    return f"shell {HOSTCORE} --root {root} hook --agent claude-code < {payload}"


def _run_hook(agent: Agent, line: str) -> list[str]:
    agent.send(line)
    out, status = agent.finish()
    assert status == 0
    return out


def test_hostcore_hook_starts_refreshes_and_ends_the_agents_session(tmp_path, agents):
    root, payloads = tmp_path / "root", tmp_path / "payloads"
    payloads.mkdir()
    registry = HeartbeatRegistry(root / "plugins" / "file-custody" / "registry")
    agent = agents("unused")

    out = _run_hook(agent, _hook_line(root, payloads, "SessionStart", source="startup"))

    assert out == []  # nothing on stdout: it is the agent's
    heartbeat = registry.read_heartbeat(SESSION_ID)
    assert (heartbeat.owner.pid, heartbeat.owner_kind) == (agent.pid, "agent")
    written = os.stat(registry.heartbeat_path(SESSION_ID)).st_mtime_ns
    _run_hook(agent, _hook_line(root, payloads, "PostToolUse", tool_name="Bash",
                                tool_use_id="toolu_1"))
    # Refreshed a moment ago by the start: the tool call's hook wrote nothing.
    assert os.stat(registry.heartbeat_path(SESSION_ID)).st_mtime_ns == written
    _run_hook(agent, _hook_line(root, payloads, "SessionEnd", reason="exit"))
    view = _session(registry, SESSION_ID)
    assert (view.state, view.owner_pid, view.liveness) == ("ended", agent.pid, "live")


def test_a_session_id_that_is_no_plain_name_starts_nothing_and_is_a_counted_fault(
        tmp_path, agents):
    from hostcore.agents.faults import faults

    root, payloads = tmp_path / "root", tmp_path / "payloads"
    payloads.mkdir()
    agent = agents("unused")

    stderr = tmp_path / "hook-stderr.txt"
    _run_hook(agent, _hook_line(root, payloads, "SessionStart", session_id="../escape")
              + f" 2> {stderr}")

    registry = HeartbeatRegistry(root / "plugins" / "file-custody" / "registry")
    assert not registry.heartbeats_dir.exists() or os.listdir(registry.heartbeats_dir) == []
    assert not (tmp_path / "escape.json").exists()
    assert [f.kind for f in faults(root)] == ["plugin_failed"]
    # The fault is logged by why, never by the session id or a path.
    logged = stderr.read_text()
    assert "could not act on SessionStart" in logged
    assert "escape" not in logged and str(tmp_path) not in logged


def test_a_start_refused_by_a_live_owner_is_logged_without_the_session_id_or_paths(
        tmp_path, agents):
    from hostcore.agents.faults import faults

    root, payloads = tmp_path / "root", tmp_path / "payloads"
    payloads.mkdir()
    registry = HeartbeatRegistry(root / "plugins" / "file-custody" / "registry").ensure()
    start_agent_session(registry, SESSION_ID, agent=os.getpid())  # this test's process
    agent = agents("unused")
    stderr = tmp_path / "hook-stderr.txt"

    _run_hook(agent, _hook_line(root, payloads, "SessionStart") + f" 2> {stderr}")

    assert registry.read_heartbeat(SESSION_ID).owner.pid == os.getpid()  # not taken over
    assert [f.kind for f in faults(root)] == ["plugin_failed"]
    logged = stderr.read_text()
    assert "CustodyRefused (held)" in logged
    assert SESSION_ID not in logged and str(tmp_path) not in logged


def test_custody_sessions_lists_each_session_with_its_owner(hostcore_cli, register_plugin,
                                                            tmp_path):
    import hostcore_file_custody.plugin as custody_plugin

    register_plugin(custody_plugin)
    registry = HeartbeatRegistry(tmp_path / "cli-root" / "plugins" / "file-custody"
                                 / "registry").ensure()
    agent_owned = start_agent_session(registry, "alpha", agent=os.getpid())
    start_agent_session(registry, "gamma", agent=os.getpid())
    end_agent_session(registry, "gamma", agent=os.getpid())
    with registry.start_session("beta") as session:
        result = hostcore_cli("custody", "sessions", "--json")
        table = hostcore_cli("custody", "sessions")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["registry"] == str(registry.root) and report["unreadable"] == 0
    assert report["sessions"] == [
        {"instance": "alpha", "generation": agent_owned.generation_id, "state": "live",
         "owner_pid": os.getpid(), "owner_kind": "agent", "liveness": "live"},
        {"instance": "beta", "generation": session.generation_id, "state": "live",
         "owner_pid": os.getpid(), "owner_kind": "process", "liveness": "live"},
        {"instance": "gamma", "generation": registry.read_generation("gamma").generation_id,
         "state": "ended", "owner_pid": os.getpid(), "owner_kind": "agent",
         "liveness": "live"},
    ]
    assert table.exit_code == 0 and "OWNER KIND" in table.stdout and "gamma" in table.stdout


def test_custody_sessions_of_a_missing_registry_lists_none(hostcore_cli, register_plugin):
    import hostcore_file_custody.plugin as custody_plugin

    register_plugin(custody_plugin)
    result = hostcore_cli("custody", "sessions", "--json")
    table = hostcore_cli("custody", "sessions")
    assert result.exit_code == 0 and table.exit_code == 0
    report = json.loads(result.stdout)
    assert (report["exists"], report["sessions"], report["refused"]) == (False, [], None)
    assert "the registry does not exist" in table.stdout


def test_custody_sessions_refuses_a_world_writable_registry_with_exit_2(
        hostcore_cli, register_plugin, tmp_path):
    import hostcore_file_custody.plugin as custody_plugin

    register_plugin(custody_plugin)
    registry = HeartbeatRegistry(tmp_path / "cli-root" / "plugins" / "file-custody"
                                 / "registry").ensure()
    start_agent_session(registry, "alpha", agent=os.getpid())
    os.chmod(registry.root, 0o777)
    result = hostcore_cli("custody", "sessions", "--json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["sessions"] == [] and "writable by every user" in report["refused"]
