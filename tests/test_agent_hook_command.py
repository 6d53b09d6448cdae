"""``hostcore hook``: the real console script, run as Claude Code and Codex run their hooks
(one process per event, JSON on stdin), against a real root and store."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.agents import dispatch, faults, index
from hostcore.agents.budget import budget_seconds
from hostcore.agents.hook import LEAN_BUILTINS, run_hook
from hostcore.host import Host
from hostcore.plugin.loader import load_plugins
from hostcore.plugin.markers import hookimpl

_spec = importlib.util.spec_from_file_location(
    "agent_hook_helpers", Path(__file__).with_name("agent_hook_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

SECRET = "hunter2-do-not-keep"


@pytest.fixture
def env(tmp_path):
    return helpers.agent_env(tmp_path)


@pytest.fixture
def root(tmp_path):
    return tmp_path / "root"


def test_stop_stores_the_sessions_transcript_rows_with_no_run(root, env):
    transcript = helpers.claude_transcript(env, "s1", 40)
    done = helpers.hook(root, env, helpers.claude_event("Stop", "s1", transcript,
                                                        stop_hook_active=False))
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 40
    assert helpers.hook_faults(root, env) == {}


def test_session_end_stores_what_came_after_stop_and_a_tick_then_adds_nothing(root, env):
    transcript = helpers.claude_transcript(env, "s1", 10)
    assert helpers.hook(root, env, helpers.claude_event("Stop", "s1", transcript)).returncode == 0
    with transcript.open("a") as out:
        out.write("".join(helpers.claude_line("s1", n) + "\n" for n in range(10, 15)))
    done = helpers.hook(root, env, helpers.claude_event("SessionEnd", "s1", transcript,
                                                        reason="other"))
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 15
    # The tick reads every transcript from the cursor the hooks moved: nothing twice.
    assert helpers.hostcore(root, env, "run", "--once").returncode == 0
    assert helpers.stored_rows(root, env) == 15


def test_a_line_still_being_written_at_session_end_is_stored_by_the_next_tick(root, env):
    transcript = helpers.claude_transcript(env, "s1", 3)
    with transcript.open("a") as out:
        out.write(helpers.claude_line("s1", 3)[:40])  # the agent is behind its hook
    helpers.hook(root, env, helpers.claude_event("SessionEnd", "s1", transcript))
    assert helpers.stored_rows(root, env) == 3
    with transcript.open("a") as out:
        out.write(helpers.claude_line("s1", 3)[40:] + "\n")
    assert helpers.hostcore(root, env, "run", "--once").returncode == 0
    assert helpers.stored_rows(root, env) == 4


def test_session_end_leaves_what_does_not_fit_claude_codes_limit_to_the_next_tick(
        root, env):
    transcript = helpers.claude_transcript(env, "s1", 20)
    env["CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS"] = "500"  # less than the margin: no time
    done = helpers.hook(root, env, helpers.claude_event("SessionEnd", "s1", transcript))
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 0
    assert helpers.hostcore(root, env, "run", "--once").returncode == 0
    assert helpers.stored_rows(root, env) == 20


def test_a_session_ends_budget_is_what_its_agent_gives_less_a_margin():
    assert budget_seconds("SessionEnd", "claude-code", {}) == pytest.approx(0.6)
    assert budget_seconds("SessionEnd", "claude-code",
                          {"CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS": "5000"}) \
        == pytest.approx(4.1)
    assert budget_seconds("SessionEnd", "codex", {}) == pytest.approx(2.1)
    assert budget_seconds("SessionEnd", "claude-code",
                          {"CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS": "soon"}) \
        == pytest.approx(0.6)
    assert budget_seconds("Stop", "codex", {}) == 0.8
    assert budget_seconds("PostToolUse", "claude-code", {}) == 0.5


def test_a_stop_whose_start_took_its_whole_budget_still_gives_the_plugins_a_floor(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    recorder = _Records()

    def make_host(lean):
        plugins = load_plugins(LEAN_BUILTINS, (recorder,), load_entrypoints=False, env={})
        return Host(root=root, env={}, plugin_set=plugins)

    for name, floor in (("Stop", 0.25), ("SessionEnd", 0.0)):
        payload = json.dumps(helpers.claude_event(name, "s9", None)).encode()
        run_hook(agent="claude-code", data=payload, oversized=False, root=root, env={},
                 make_host=make_host, started=0.0, clock=lambda: 5.0)
        assert recorder.seen[-1] == ("claude-code", name, "s9", floor)


def test_a_codex_stop_stores_its_rollout(root, env):
    folder = Path(env["CODEX_HOME"]) / "sessions" / "2026" / "01" / "02"
    folder.mkdir(parents=True)
    rollout = folder / "rollout-2026-01-02T10-00-00-c1.jsonl"
    rollout.write_text(
        '{"timestamp":"2026-01-02T10:00:00Z","type":"session_meta","payload":{"id":"c1",'
        '"cwd":"/work/project"}}\n'
        '{"timestamp":"2026-01-02T10:00:01Z","type":"event_msg","payload":{"type":"x"}}\n')
    payload = {"hook_event_name": "Stop", "session_id": "c1", "cwd": "/work/project",
               "transcript_path": str(rollout), "model": "gpt-5", "turn_id": "t1",
               "stop_hook_active": False, "last_assistant_message": SECRET}
    done = helpers.hook(root, env, payload, "codex")
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 2


def test_a_transcript_outside_the_sources_folder_is_left_alone(root, env, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "s1.jsonl"
    elsewhere.parent.mkdir()
    elsewhere.write_text(helpers.claude_line("s1", 1) + "\n")
    done = helpers.hook(root, env, helpers.claude_event("Stop", "s1", elsewhere))
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 0
    assert helpers.hook_faults(root, env) == {}


BAD_INPUT = {
    "bad_json": b"{not json",
    "not_an_object": b"[1, 2, 3]",
    "unknown_event": json.dumps({"hook_event_name": "Teleport", "session_id": "s1"}).encode(),
    "no_session": json.dumps({"hook_event_name": "Stop", "cwd": "/w"}).encode(),
    "wrong_type": json.dumps({"hook_event_name": "Stop", "session_id": 7}).encode(),
    "empty": b"",
}
KIND = {"bad_json": "bad_json", "not_an_object": "missing_fields",
        "unknown_event": "unknown_event", "no_session": "missing_fields",
        "wrong_type": "missing_fields", "empty": "bad_json"}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_input_that_is_no_event_exits_0_and_is_counted_then_fails_one_tick(root, env, case):
    done = helpers.hook(root, env, BAD_INPUT[case])
    assert (done.returncode, done.stdout) == (0, b"")
    kind = KIND[case]
    assert kind in done.stderr.decode()
    assert helpers.hook_faults(root, env) == {kind: 1}
    first = helpers.hostcore(root, env, "run", "--once")
    assert first.returncode == 1
    assert "agent-hooks" in first.stderr and f"{kind}=1" in first.stderr
    # Reported once: the next tick is clean, the count stays in status.
    assert helpers.hostcore(root, env, "run", "--once").returncode == 0
    assert helpers.hook_faults(root, env) == {kind: 1}


def test_an_agent_hostcore_does_not_know_is_a_counted_fault(root, env):
    done = helpers.hook(root, env, helpers.claude_event("Stop", "s1", None), "cursor")
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.hook_faults(root, env) == {"unknown_agent": 1}


def test_a_huge_stdin_is_read_to_its_end_dropped_and_counted(root, env):
    payload = helpers.claude_event("PostToolUse", "s1", None, tool_name="Read",
                                   tool_response={"content": "y" * (6 << 20)})
    data = json.dumps(payload).encode()
    process = subprocess.Popen([helpers.HOSTCORE, "--root", str(root), "hook", "--agent",
                                "claude-code"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    out, _ = process.communicate(data, timeout=60)  # a BrokenPipeError would raise here
    assert (process.returncode, out) == (0, b"")
    assert helpers.hook_faults(root, env) == {"oversized": 1}


def test_a_root_that_cannot_be_used_is_said_on_stderr_and_the_agent_goes_on(tmp_path, env):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = helpers.hook(blocker / "root", env, helpers.claude_event("Stop", "s1", None))
    assert (done.returncode, done.stdout) == (0, b"")
    assert "state root" in done.stderr.decode() and "dropped" in done.stderr.decode()


def test_an_empty_root_option_is_refused_without_blocking_the_agent(tmp_path, env):
    done = subprocess.run([helpers.HOSTCORE, "--root", "", "hook", "--agent", "claude-code"],
                          input=b"{}", capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"")
    assert "--root is empty" in done.stderr.decode()
    assert list(tmp_path.iterdir()) == [tmp_path / "home"]  # nothing made in the cwd


def test_prompts_tool_content_and_answers_are_never_kept_under_the_root(root, env):
    transcript = helpers.claude_transcript(env, "s1", 2)
    for payload in (
            helpers.claude_event("UserPromptSubmit", "s1", transcript, prompt=SECRET),
            helpers.claude_event("PostToolUse", "s1", transcript, tool_name="Bash",
                                 tool_input={"command": SECRET},
                                 tool_response={"stdout": SECRET}, tool_use_id="t1"),
            helpers.claude_event("Stop", "s1", transcript, last_assistant_message=SECRET),
            {"hook_event_name": SECRET, "session_id": "s1"}):
        assert helpers.hook(root, env, payload).returncode == 0
    kept = [p for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert kept == []
    assert [row[1] for row in faults.log(root)] == ["unknown_event"]


def _modules_after_hook(root, env, payload):
    script = (
        "import sys\n"
        "from hostcore.__main__ import main\n"
        "try:\n"
        f"    main(['--root', {str(root)!r}, 'hook', '--agent', 'claude-code'])\n"
        "except SystemExit as exit:\n"
        "    sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        "    raise\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"")
    line = next(x for x in done.stderr.decode().splitlines() if x.startswith("MODULES "))
    return set(line.split()[1:])


def test_a_tool_event_loads_neither_click_nor_the_store_nor_other_plugins(root, env):
    # Every plugin installed; file custody, which refreshes at every PostToolUse, is
    # blocked so that this event is due for a plugin only by its tool (a Write).
    all_plugins = {k: v for k, v in env.items() if k != "HOSTCORE_LOAD_PLUGINS"}
    all_plugins["HOSTCORE_DISABLE_PLUGINS"] = "file-custody"
    write = helpers.claude_event("PostToolUse", "s1", None, tool_name="Write",
                                 tool_input={"file_path": "/nowhere/a.txt"})
    _modules_after_hook(root, all_plugins, write)  # the first builds the plugin index
    loaded = _modules_after_hook(root, all_plugins, write)
    assert "hostcore.governance.hook" in loaded  # the gate wants a Write: it was called
    assert {"click", "hostcore.evidence.store", "hostcore.export.exporter",
            "hostcore.workitems.poller"} & loaded == set()
    plugins = {m.split(".")[0] for m in loaded if m.startswith("hostcore_")}
    indexed = json.loads((root / index.FILE).read_text())
    assert "claude-code" in indexed["plugins"] and "gh" not in indexed["plugins"]
    # Only the plugins due for the event are imported: the sources want no tool event.
    assert plugins == set()


def test_the_plugin_index_is_rebuilt_when_the_allow_list_changes(root, env):
    def indexed():
        found = json.loads((root / index.FILE).read_text())
        return found["signature"], found["plugins"]

    helpers.hook(root, env, helpers.claude_event("SessionStart", "s1", None, source="startup"))
    first, plugins = indexed()
    assert plugins == ["claude-code", "codex"]
    helpers.hook(root, env, helpers.claude_event("SessionStart", "s2", None, source="startup"))
    assert indexed() == (first, plugins)  # the same plugins: the cache is kept
    only_codex = {**env, "HOSTCORE_LOAD_PLUGINS": "codex"}
    helpers.hook(root, only_codex, helpers.claude_event("SessionStart", "s3", None))
    second, plugins = indexed()
    assert second != first and plugins == ["codex"]


def test_an_index_made_for_other_plugins_is_not_used(root):
    index.write(root, index.PluginIndex("another-signature", ("gone",)))
    assert dispatch.read_index(str(root), "this-signature") is None
    assert dispatch.read_index(str(root), "another-signature")["plugins"] == ["gone"]
    (root / index.FILE).write_text("{broken")
    assert dispatch.read_index(str(root), "another-signature") is None


class _Raises:
    __name__ = "raises-on-events"

    @hookimpl
    def hostcore_agent_event(self, event, host):
        raise RuntimeError("a bug of this plugin")


class _Records:
    __name__ = "records-events"

    def __init__(self):
        self.seen = []

    @hookimpl
    def hostcore_agent_event(self, event, host):
        self.seen.append((event.agent, event.name, event.session_id, event.budget_seconds))


def test_a_plugin_that_raises_is_counted_and_the_other_plugins_still_get_the_event(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    recorder = _Records()

    def make_host(lean):
        # This test's plugins instead of the index's: what matters is the calls.
        plugins = load_plugins(LEAN_BUILTINS, (_Raises(), recorder), load_entrypoints=False,
                               env={})
        return Host(root=root, env={}, plugin_set=plugins)

    payload = json.dumps(helpers.claude_event("Stop", "s9", None)).encode()
    kinds = run_hook(agent="claude-code", data=payload, oversized=False, root=root,
                     env={"HOSTCORE_LOAD_PLUGINS": ""}, make_host=make_host,
                     started=0.0, clock=lambda: 0.25).faults
    assert kinds == ["plugin_failed"]
    assert recorder.seen == [("claude-code", "Stop", "s9", pytest.approx(0.55))]  # 0.8 - 0.25
    assert {f.kind: f.count for f in faults.faults(root)} == {"plugin_failed": 1}


def test_what_a_plugin_prints_goes_to_stderr_not_to_the_agent(tmp_path):
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    script_root = str(root)
    code = (
        "import io, json, sys\n"
        "from hostcore.agents.hook import LEAN_BUILTINS, budget_seconds, run_hook\n"
        "from hostcore.host import Host\n"
        "from hostcore.plugin.loader import load_plugins\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_agent_hook_command import _chatty\n"
        "plugins = load_plugins(LEAN_BUILTINS, (_chatty(),), load_entrypoints=False, env={})\n"
        f"run_hook(agent='codex', data=json.dumps({{'hook_event_name': 'Stop', "
        f"'session_id': 's'}}).encode(), oversized=False, root=__import__('pathlib').Path("
        f"{script_root!r}), env={{}}, make_host=lambda lean: Host(root={script_root!r}, "
        "env={}, plugin_set=plugins), started=0.0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "hello from a plugin" in done.stderr


def _chatty():
    class Chatty:
        __name__ = "chatty"

        @hookimpl
        def hostcore_agent_event(self, event, host):
            print("hello from a plugin")

    return Chatty()
