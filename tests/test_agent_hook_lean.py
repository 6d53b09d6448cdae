"""The hook's lean path: an event whose due plugins all declared a lean handler is
handled by those handlers, with no host; a handler that fails hands its plugin to the
full path, which calls the plugin's hook and counts the fault."""

from __future__ import annotations

import compileall
import importlib.util
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from hostcore.agents import dispatch, index
from hostcore.agents.hook import LEAN_BUILTINS
from hostcore.config_tables import table_name
from hostcore.plugin.interest import agent_interest, is_handler_name
from hostcore.plugin.loader import ENV_ALLOW, load_plugins
from hostcore.plugin.markers import hookimpl

_spec = importlib.util.spec_from_file_location(
    "agent_hook_helpers", Path(__file__).with_name("agent_hook_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

# The plugin: its lean handler (a module of its own, importing no hostcore) and its
# full hook each append one JSON line to a file named by its config table (under the
# root), so a test sees which ran, with what. The handler raises when the config asks
# it to, or exits; it prints to stdout, which must never reach the agent.
_LEAN = """
    import json, os, sys

    def note(root, config, **seen):
        with open(os.path.join(root, config.get("log", "seen.jsonl")), "a") as out:
            out.write(json.dumps(seen) + "\\n")

    def lean(event):
        config = dict(event.config)
        print("lean stdout")
        if config.get("lean") == "raise":
            raise RuntimeError("the lean handler cannot")
        if config.get("lean") == "exit":
            sys.exit(2)
        note(event.root, config, path="lean", event=event.name, session=event.session_id,
             source=event.source, budget=event.budget_seconds, cwd=event.cwd,
             loaded=sorted(m for m in ("pluggy", "hostcore.host") if m in sys.modules))
"""
_PLUGIN = """
    from hostcore import hookimpl
    from hostcore.plugin.interest import agent_interest
    from {lean} import note

    @hookimpl
    @agent_interest("SessionStart", "SessionEnd", lean="{lean}:lean")
    def hostcore_agent_event(event, host):
        config = host.config.settings.plugins.get("watcher", {{}})
        note(str(host.root), config, path="full", event=event.name, session=event.session_id)
"""


@pytest.fixture
def setup(tmp_path, fake_site):
    lean = f"watcher_lean_{tmp_path.name.replace('-', '_')}"
    (fake_site.folder / f"{lean}.py").write_text(textwrap.dedent(_LEAN))
    fake_site.modules.append(lean)
    fake_site.add("hostcore-watcher", {"watcher": textwrap.dedent(_PLUGIN.format(lean=lean))})
    # Compiled now, as pip compiles what it installs: a __pycache__ made by the first
    # hook would change the folder, so the plugin index would be built once more.
    compileall.compile_dir(fake_site.folder, quiet=1)
    env = helpers.agent_env(tmp_path, PYTHONPATH=str(fake_site.folder))
    env[ENV_ALLOW] = "watcher"
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    return root, env


def _seen(root: Path, name: str = "seen.jsonl") -> list[dict[str, object]]:
    path = root / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _start(session: str = "s1") -> dict[str, object]:
    return helpers.claude_event("SessionStart", session, None, source="startup")


def _hook(root: Path, env: dict[str, str], payload: dict[str, object]
          ) -> subprocess.CompletedProcess[bytes]:
    # The first hook after an install builds the index with every plugin loaded (the
    # full path); each later one finds it made.
    done = helpers.hook(root, env, payload)
    assert done.stdout == b"", done.stdout  # nothing but hook JSON on the agent's stdout
    return done


def test_an_event_every_due_plugin_has_a_lean_handler_for_builds_no_host(setup):
    root, env = setup
    assert _hook(root, env, _start("s0")).returncode == 0  # builds the index
    assert _hook(root, env, _start()).returncode == 0
    seen = _seen(root)
    assert [s["path"] for s in seen] == ["full", "lean"]
    lean = seen[1]
    assert (lean["event"], lean["session"], lean["source"]) == ("SessionStart", "s1", "startup")
    assert lean["cwd"] == "/work/project"
    assert lean["loaded"] == []  # no pluggy, no host in the process
    assert 0.0 < float(lean["budget"]) <= 0.5  # what is left of the default budget
    assert helpers.hook_faults(root, env) == {}


def test_the_lean_handler_reads_its_own_config_table_under_any_spelling(setup):
    root, env = setup
    _hook(root, env, _start("s0"))
    (root / "hostcore.toml").write_text('[plugins.WATCHER]\nlog = "other.jsonl"\n')
    assert _hook(root, env, _start()).returncode == 0
    assert [s["path"] for s in _seen(root, "other.jsonl")] == ["lean"]


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_lean_handler_that_fails_hands_its_event_to_the_full_hook_and_is_counted(
        setup, how):
    root, env = setup
    _hook(root, env, _start("s0"))
    (root / "hostcore.toml").write_text(f'[plugins.watcher]\nlean = "{how}"\n')
    done = _hook(root, env, _start())
    assert done.returncode == 0  # a plugin's exit status is never the hook's
    assert b"watcher's lean handler raised" in done.stderr
    assert [s["path"] for s in _seen(root)] == ["full", "full"]
    assert helpers.hook_faults(root, env) == {"lean_failed": 1}


@pytest.mark.parametrize("config", ["[plugins\n", '[plugins]\nwatcher = 3\n',
                                    "[plugins.watcher]\n[plugins.Watcher]\n"])
def test_a_config_the_host_would_refuse_is_left_to_the_full_path(setup, config):
    root, env = setup
    _hook(root, env, _start("s0"))
    (root / "hostcore.toml").write_text(config)
    done = _hook(root, env, _start())
    assert done.returncode == 0
    # The full path reports the config, naming it, and calls nobody; no lean fault.
    assert [s["path"] for s in _seen(root)] == ["full"]
    assert b"hostcore.toml" in done.stderr
    assert b"lean_failed" not in done.stderr


def test_a_named_config_file_that_is_missing_is_the_full_paths_error(setup, tmp_path):
    root, env = setup
    _hook(root, env, _start("s0"))
    done = helpers.hook(root, env, _start(), "claude-code", "--config",
                        str(tmp_path / "missing.toml"))
    assert done.returncode == 0
    assert b"config file not found" in done.stderr
    assert [s["path"] for s in _seen(root)] == ["full"]


def test_an_event_one_due_plugin_has_no_lean_handler_for_takes_the_full_path(tmp_path):
    class Lean:
        __name__ = "lean-one"

        @hookimpl
        @agent_interest("SessionStart", lean="json:dumps")
        def hostcore_agent_event(self, event, host):
            pass

    class Plain:
        __name__ = "plain-one"

        @hookimpl
        @agent_interest("SessionStart", "Stop")
        def hostcore_agent_event(self, event, host):
            pass

        @hookimpl
        @agent_interest("SessionEnd", lean="json:dumps")
        def hostcore_agent_gate(self, event, host):
            pass

    plugins = load_plugins(LEAN_BUILTINS, (Lean(), Plain()), load_entrypoints=False, env={})
    index.write(tmp_path, index.build(plugins, "sig"))
    found = dispatch.read_index(str(tmp_path), "sig")
    assert found is not None
    # A gate has no lean form: its declaration keeps no handler.
    assert found["interests"]["plain-one"] == [  # type: ignore[index]
        {"events": ["SessionStart", "Stop"]}, {"events": ["SessionEnd"]}]

    def handlers(name: str, due: list[str]) -> dict[str, str] | None:
        fields: dict[str, object] = {"hook_event_name": name, "session_id": "s1"}
        return dispatch.lean_handlers(dispatch.Decision(str(tmp_path), fields, found, due))

    assert handlers("SessionStart", ["lean-one"]) == {"lean-one": "json:dumps"}
    assert handlers("SessionStart", ["lean-one", "plain-one"]) is None
    assert handlers("SessionEnd", ["plain-one"]) is None
    assert handlers("SessionStart", []) is None


@pytest.mark.parametrize("name", ["json", "json:", ":dumps", "json:du mps", "a..b:c",
                                  "json:dumps:x", "1json:dumps"])
def test_a_lean_handler_that_is_no_module_function_name_fails_at_import(name):
    assert not is_handler_name(name)
    with pytest.raises(ValueError, match="lean="):
        agent_interest("SessionStart", lean=name)


def test_plugin_tables_are_matched_by_their_normalised_name():
    assert table_name("Claude__Code") == table_name("claude.code") == "claude-code"
    assert table_name("-a_") == "-a-"


def test_the_lean_path_imports_no_typing_extensions_and_leaves_it_importable(setup):
    root, env = setup
    _hook(root, env, _start("s0"))
    # In the process the hook ran in: msgspec took typing's names; the package is
    # importable still.
    report = ("'typing_extensions' in sys.modules, "
              "__import__('typing_extensions').__name__")
    assert helpers.hook_then(root, env, _start(), report) == "(False, 'typing_extensions')"
    assert [s["path"] for s in _seen(root)] == ["full", "lean"]
