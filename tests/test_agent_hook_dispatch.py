"""The hook's dispatcher: which plugins an agent event is due for, decided from the plugin
index with the standard library alone, and the declarations that index keeps."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.agents import dispatch, index
from hostcore.agents.hook import LEAN_BUILTINS, rebuild_index
from hostcore.agents.written import FILE_TOOLS, PATCH_TOOLS
from hostcore.governance.hook import WRITING_TOOLS
from hostcore.host import ENV_ROOT
from hostcore.plugin.interest import KNOWN_EVENTS, agent_interest
from hostcore.plugin.loader import ENV_ALLOW, ENV_BLOCK, load_plugins
from hostcore.plugin.markers import hookimpl

_spec = importlib.util.spec_from_file_location(
    "agent_hook_helpers", Path(__file__).with_name("agent_hook_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

# What a hook no plugin is due for must not import: the host's whole machinery.
HEAVY = ("msgspec", "pluggy", "click", "logging", "sqlite3", "typing", "threading",
         "contextlib", "pathlib", "hostcore.host", "hostcore.agents.hook",
         "hostcore.plugin.loader")


@pytest.fixture
def env(tmp_path):
    return helpers.agent_env(tmp_path)


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir(mode=0o700)
    return folder


def _modules_after_hook(root: Path, env: dict[str, str], payload: dict[str, object]
                        ) -> set[str]:
    return set(helpers.hook_then(root, env, payload, "' '.join(sorted(sys.modules))").split())


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY
                  or m.startswith("hostcore_"))


def test_the_dispatchers_names_are_the_loaders_and_the_hosts():
    assert (dispatch.ENV_ALLOW, dispatch.ENV_BLOCK, dispatch.ENV_ROOT) == (
        ENV_ALLOW, ENV_BLOCK, ENV_ROOT)


def test_the_gate_declares_every_tool_that_writes_files():
    assert set(WRITING_TOOLS) == set(FILE_TOOLS) | set(PATCH_TOOLS)


def test_a_tool_call_no_plugin_wants_imports_nothing_but_the_standard_library(root, env):
    bash = helpers.claude_event("PostToolUse", "s1", None, tool_name="Bash",
                                tool_input={"command": "ls"})
    first = _modules_after_hook(root, env, bash)  # builds the plugin index
    assert "hostcore.host" in first
    again = _modules_after_hook(root, env, bash)
    assert _heavy(again) == []
    assert "hostcore.agents.dispatch" in again


def test_a_write_reaches_the_gate_and_a_read_does_not(root, env):
    read = helpers.claude_event("PostToolUse", "s1", None, tool_name="Read",
                                tool_input={"file_path": "/nowhere/a.txt"})
    write = helpers.claude_event("PostToolUse", "s1", None, tool_name="Write",
                                 tool_input={"file_path": "/nowhere/a.txt"})
    _modules_after_hook(root, env, read)  # builds the plugin index
    assert "hostcore.governance.hook" not in _modules_after_hook(root, env, read)
    loaded = _modules_after_hook(root, env, write)
    assert {"hostcore.host", "hostcore.governance.hook"} <= loaded
    # The transcript plugins want Stop and SessionEnd only: never imported for a tool.
    assert {m for m in loaded if m.startswith("hostcore_")} == set()


def test_input_the_decoder_refuses_is_never_skipped_but_counted(root, env):
    helpers.hook(root, env, helpers.claude_event("PostToolUse", "s1", None, tool_name="Bash"))
    cases = {"unknown_event": {"hook_event_name": "Teleport", "session_id": "s1"},
             "missing_fields": {"hook_event_name": "PostToolUse", "session_id": "s1",
                                "cwd": None, "tool_name": "Bash"}}
    for kind, payload in cases.items():
        done = helpers.hook(root, env, payload)
        assert (done.returncode, done.stdout) == (0, b"")
        assert kind in done.stderr.decode()
    assert helpers.hook_faults(root, env) == {"unknown_event": 1, "missing_fields": 1}


@pytest.mark.parametrize(("payload", "kept"), [
    ({"hook_event_name": "Stop", "session_id": "s", "cwd": "/w"}, True),
    ({"hook_event_name": "Stop", "session_id": "s", "transcript_path": None}, True),
    ({"hook_event_name": "Stop", "session_id": "s", "cwd": None}, False),
    ({"hook_event_name": "Stop", "session_id": ""}, False),
    ({"hook_event_name": "Stop", "session_id": 7}, False),
    ({"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": 1}, False),
    ({"hook_event_name": "Teleport", "session_id": "s"}, False),
    ({"session_id": "s"}, False),
    ([1, 2], False),
])
def test_only_a_payload_the_full_decoder_takes_is_judged_by_the_dispatcher(payload, kept):
    assert (dispatch.payload_fields(json.dumps(payload).encode()) is not None) is kept


def test_a_root_another_user_could_write_is_left_to_the_full_checks(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert dispatch.trusted_root(str(shared), {}) is None
    assert dispatch.trusted_root(None, {}) is None  # the default root: the full path's
    assert dispatch.trusted_root(str(tmp_path / "absent"), {}) is None
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert dispatch.trusted_root(None, {ENV_ROOT: str(private)}) == str(private)


class _Custody:
    __name__ = "refresher"

    @hookimpl
    @agent_interest("SessionStart", "PostToolUse", every_seconds={"PostToolUse": 60})
    def hostcore_agent_event(self, event, host):
        pass


class _Gate:
    __name__ = "gatekeeper"

    @hookimpl
    @agent_interest("Stop")
    def hostcore_agent_event(self, event, host):
        pass

    @hookimpl
    @agent_interest("PostToolUse", tools=("Write",))
    def hostcore_agent_gate(self, event, host):
        pass


class _Everything:
    __name__ = "everything"

    @hookimpl
    def hostcore_agent_event(self, event, host):
        pass


def _index(tmp_path: Path) -> dict[str, object]:
    plugins = load_plugins(LEAN_BUILTINS, (_Custody(), _Gate(), _Everything()),
                           load_entrypoints=False, env={})
    built = index.build(plugins, "sig")
    index.write(tmp_path, built)
    found = dispatch.read_index(str(tmp_path), "sig")
    assert found is not None
    return found


def _due(found, root, name, now, tool=None, session="s1"):
    fields = {"hook_event_name": name, "session_id": session, "tool_name": tool}
    return sorted(p for p in dispatch.due_plugins(found, fields, str(root), now)
                  if p in ("refresher", "gatekeeper", "everything"))


def test_the_index_keeps_each_plugins_declaration_and_joins_its_two_hooks(tmp_path):
    found = _index(tmp_path)
    interests = found["interests"]
    assert interests["refresher"] == [{"events": ["PostToolUse", "SessionStart"],
                                       "every_seconds": {"PostToolUse": 60.0}}]
    # One declaration per hookimpl: the gate's tools narrow its PostToolUse alone.
    assert interests["gatekeeper"] == [{"events": ["Stop"]},
                                       {"events": ["PostToolUse"], "tools": ["Write"]}]
    assert "everything" not in interests  # declared nothing: every event


def test_a_plugin_is_due_only_for_what_it_declared(tmp_path):
    found = _index(tmp_path)
    assert _due(found, tmp_path, "SessionStart", 1000.0) == ["everything", "refresher"]
    assert _due(found, tmp_path, "Stop", 1000.0) == ["everything", "gatekeeper"]
    assert _due(found, tmp_path, "PostToolUse", 1000.0, "Write") == [
        "everything", "gatekeeper", "refresher"]
    assert _due(found, tmp_path, "PostToolUse", 1000.0, "Read") == ["everything", "refresher"]
    assert _due(found, tmp_path, "UserPromptSubmit", 1000.0) == ["everything"]


def test_a_throttled_plugin_is_due_again_only_once_its_interval_has_passed(tmp_path):
    found = _index(tmp_path)
    dispatch.stamp(str(tmp_path), ["refresher"], "s1", 1000.0)
    assert _due(found, tmp_path, "PostToolUse", 1059.0, "Bash") == ["everything"]
    assert _due(found, tmp_path, "PostToolUse", 1060.0, "Bash") == ["everything", "refresher"]
    # A stamp from the future (the clock set back): due, or it would wait out the gap.
    assert _due(found, tmp_path, "PostToolUse", 999.0, "Bash") == ["everything", "refresher"]
    # Another session has no stamp; a start is never throttled.
    assert _due(found, tmp_path, "PostToolUse", 1001.0, "Bash", "s2") == [
        "everything", "refresher"]
    assert _due(found, tmp_path, "SessionStart", 1001.0) == ["everything", "refresher"]


def test_a_session_id_that_is_no_plain_name_is_never_throttled_nor_a_file(tmp_path):
    found = _index(tmp_path)
    dispatch.stamp(str(tmp_path), ["refresher"], "../../escape", 1000.0)
    assert not (tmp_path / "escape").exists()
    assert list((tmp_path / dispatch.STAMPS_DIR).glob("*")) == []
    assert _due(found, tmp_path, "PostToolUse", 1001.0, "Bash", "../../escape") == [
        "everything", "refresher"]


def test_a_sessions_stamps_go_at_its_end_and_abandoned_ones_at_a_start(tmp_path):
    dispatch.stamp(str(tmp_path), ["refresher"], "s1", 1000.0)
    dispatch.stamp(str(tmp_path), ["refresher"], "s2", 5000.0)
    dispatch.stamp(str(tmp_path), ["refresher"], "old", 10.0)
    dispatch.forget(str(tmp_path), session_id="s1")
    names = sorted(p.name for p in (tmp_path / dispatch.STAMPS_DIR).iterdir())
    assert names == ["refresher~old", "refresher~s2"]
    dispatch.forget(str(tmp_path), older_than=100.0)
    assert [p.name for p in (tmp_path / dispatch.STAMPS_DIR).iterdir()] == ["refresher~s2"]


def test_a_declaration_naming_no_event_an_agent_sends_fails_at_import():
    with pytest.raises(ValueError, match="no agent sends Teleport"):
        agent_interest("Stop", "Teleport")
    with pytest.raises(ValueError, match="not a declared event"):
        agent_interest("Stop", every_seconds={"PostToolUse": 5})
    with pytest.raises(ValueError, match="positive seconds"):
        agent_interest("PostToolUse", every_seconds={"PostToolUse": 0})
    assert not sorted(set(agent_interest("Stop").__closure__[0].cell_contents.events)
                      - KNOWN_EVENTS)


def test_custody_refreshes_through_the_hook_once_per_interval_then_the_end_clears_it(
        root, env):
    env = {**env, ENV_ALLOW: "file-custody"}
    start = helpers.claude_event("SessionStart", "s1", None, source="startup")
    assert helpers.hook(root, env, start).returncode == 0
    stamp = root / dispatch.STAMPS_DIR / "file-custody~s1"
    assert stamp.exists()  # the start called custody: its interval runs from now
    bash = helpers.claude_event("PostToolUse", "s1", None, tool_name="Bash")
    assert _heavy(_modules_after_hook(root, env, bash)) == []
    # Once the interval has passed (the stamp set back), the refresh is due again:
    # custody's lean handler does it, with no host (no pluggy, no plugin module).
    os.utime(stamp, (1.0, 1.0))
    modules = _modules_after_hook(root, env, bash)
    assert "hostcore_file_custody.agent_hook" in modules
    assert not modules & {"pluggy", "hostcore.host", "hostcore_file_custody.plugin"}
    assert stamp.stat().st_mtime > 1.0
    end = helpers.claude_event("SessionEnd", "s1", None, reason="exit")
    assert helpers.hook(root, env, end).returncode == 0
    assert not stamp.exists()


def test_hooks_install_rebuilds_the_index_with_the_declarations(root, env):
    rebuild_index(root, env)
    found = json.loads((root / index.FILE).read_text())
    assert found["interests"]["claude-code"] == [{"events": ["SessionEnd", "Stop"]}]
    assert found["signature"] == dispatch.signature(env)


def test_a_due_hook_loads_its_plugins_from_the_index_reading_no_metadata(root, env):
    script = (
        "import sys\n"
        "opened = []\n"
        "def audit(event, args):\n"
        "    if event == 'open' and str(args[0]).endswith(('entry_points.txt', 'METADATA')):\n"
        "        opened.append(str(args[0]))\n"
        "sys.addaudithook(audit)\n"
        "from hostcore.__main__ import main\n"
        "try:\n"
        f"    main(['--root', {str(root)!r}, 'hook', '--agent', 'claude-code'])\n"
        "except SystemExit:\n"
        "    sys.stderr.write(f'OPENED {len(opened)} ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        "    raise\n")
    stop = helpers.claude_event("Stop", "s1", helpers.claude_transcript(env, "s1", 3))

    def opened() -> tuple[int, set[str]]:
        done = subprocess.run([sys.executable, "-c", script], input=json.dumps(stop).encode(),
                              capture_output=True, env=env, timeout=60)
        assert (done.returncode, done.stdout) == (0, b""), done.stderr
        line = next(x for x in done.stderr.decode().splitlines() if x.startswith("OPENED "))
        count, *modules = line.split()[1:]
        return int(count), set(modules)

    first, _ = opened()
    assert first > 0  # the index is built from every distribution's metadata
    again, modules = opened()
    assert again == 0
    assert "hostcore_claude_code.plugin" in modules  # due at a Stop, and loaded
    assert helpers.stored_rows(root, env) == 3
