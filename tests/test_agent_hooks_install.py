"""``hostcore hooks install|uninstall|status``: the real console script editing each agent's
real settings file in a temporary home."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
from pathlib import Path

import pytest

from hostcore.agents.install import TIMEOUTS

_spec = importlib.util.spec_from_file_location(
    "agent_hook_helpers", Path(__file__).with_name("agent_hook_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

EVENTS = sorted(TIMEOUTS)


@pytest.fixture
def env(tmp_path):
    return helpers.agent_env(tmp_path)


@pytest.fixture
def root(tmp_path):
    return tmp_path / "root"


def claude_settings(env) -> Path:
    return Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"


def ours(settings: dict, agent: str = "claude-code") -> dict[str, list[dict]]:
    """hostcore's hooks in ``settings``, by event."""
    found: dict[str, list[dict]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group["hooks"]:
                if f"hook --agent {agent}" in hook.get("command", ""):
                    found.setdefault(event, []).append(hook)
    return found


def install(root, env, *args, agent="claude-code", cwd=None):
    return helpers.hostcore(root, env, "hooks", "install", "--agent", agent, *args, cwd=cwd)


def test_install_writes_one_timed_entry_per_event_running_this_hostcore_and_root(root, env):
    done = install(root, env)
    assert done.returncode == 0, done.stderr
    settings = json.loads(claude_settings(env).read_text())
    found = ours(settings)
    assert sorted(found) == EVENTS
    for event, hooks in found.items():
        assert len(hooks) == 1
        (hook,) = hooks
        assert hook["type"] == "command" and hook["timeout"] == TIMEOUTS[event]
        words = shlex.split(hook["command"])
        assert Path(words[0]).is_absolute() and Path(words[0]).name.startswith("hostcore")
        assert words[1:] == ["--root", str(root.resolve()), "hook", "--agent", "claude-code"]
    assert claude_settings(env).stat().st_mode & 0o777 == 0o600


def test_installing_twice_leaves_the_file_as_the_first_install_wrote_it(root, env):
    install(root, env)
    first = claude_settings(env).read_bytes()
    assert install(root, env).returncode == 0
    assert claude_settings(env).read_bytes() == first


def test_install_keeps_every_other_setting_and_the_users_own_hooks(root, env):
    path = claude_settings(env)
    path.parent.mkdir(parents=True)
    mine = {"type": "command", "command": "notify-send done", "timeout": 3}
    path.write_text(json.dumps({
        "model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"Stop": [{"hooks": [mine]}],
                  "Notification": [{"matcher": "", "hooks": [mine]}]}}))
    path.chmod(0o644)
    assert install(root, env).returncode == 0
    settings = json.loads(path.read_text())
    assert settings["model"] == "opus"
    assert settings["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert settings["hooks"]["Notification"] == [{"matcher": "", "hooks": [mine]}]
    assert settings["hooks"]["Stop"][0] == {"hooks": [mine]}  # the user's first
    assert len(settings["hooks"]["Stop"]) == 2
    assert path.stat().st_mode & 0o777 == 0o644


def test_installing_for_another_root_replaces_hostcores_entries(root, env, tmp_path):
    install(root, env)
    other = tmp_path / "other-root"
    assert install(other, env).returncode == 0
    found = ours(json.loads(claude_settings(env).read_text()))
    assert sorted(found) == EVENTS
    assert all(len(h) == 1 and str(other.resolve()) in h[0]["command"] for h in found.values())


def test_uninstall_takes_out_hostcores_entries_only(root, env):
    path = claude_settings(env)
    path.parent.mkdir(parents=True)
    mine = {"type": "command", "command": "notify-send done"}
    path.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [mine]}]}}))
    install(root, env)
    install(root, env, agent="codex", cwd=None)  # Codex's file: another file entirely
    done = helpers.hostcore(root, env, "hooks", "uninstall", "--agent", "claude-code")
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text()) == {"model": "opus",
                                            "hooks": {"Stop": [{"hooks": [mine]}]}}
    again = helpers.hostcore(root, env, "hooks", "uninstall", "--agent", "claude-code")
    assert again.returncode == 0 and "no hostcore hook" in again.stdout


def test_uninstall_of_a_file_hostcore_made_leaves_no_hooks_key(root, env):
    install(root, env)
    helpers.hostcore(root, env, "hooks", "uninstall", "--agent", "claude-code")
    assert json.loads(claude_settings(env).read_text()) == {}


@pytest.mark.parametrize("text", ["{\"hooks\": {", "[1, 2]", "{\"hooks\": []}",
                                  "{\"hooks\": {\"Stop\": {\"hooks\": []}}}"])
def test_a_settings_file_that_cannot_be_edited_is_refused_by_name_and_left_alone(
        root, env, text):
    path = claude_settings(env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for command in ("install", "uninstall"):
        done = helpers.hostcore(root, env, "hooks", command, "--agent", "claude-code")
        assert done.returncode == 1
        assert str(path) in done.stderr and "nothing was written" in done.stderr
        assert path.read_text() == text
    status = helpers.hostcore(root, env, "hooks", "status", "--agent", "claude-code", "--json")
    assert status.returncode == 0
    assert str(path) in json.loads(status.stdout)[0]["error"]


def test_dry_run_prints_the_file_it_would_write_and_writes_nothing(root, env):
    done = install(root, env, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert sorted(ours(json.loads(done.stdout))) == EVENTS
    assert not claude_settings(env).exists()
    assert not root.exists()


def test_project_scope_writes_the_projects_claude_settings(root, env, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    assert install(root, env, "--scope", "project", cwd=project).returncode == 0
    assert sorted(ours(json.loads((project / ".claude" / "settings.json").read_text()))) \
        == EVENTS
    assert not claude_settings(env).exists()


def test_without_claude_config_dir_the_users_home_claude_folder_is_used(root, env, tmp_path):
    del env["CLAUDE_CONFIG_DIR"]
    assert install(root, env).returncode == 0
    path = tmp_path / "home" / ".claude" / "settings.json"
    assert sorted(ours(json.loads(path.read_text()))) == EVENTS


def test_codex_hooks_go_to_hooks_json_in_codex_home_and_codex_project_folder(
        root, env, tmp_path):
    assert install(root, env, agent="codex").returncode == 0
    found = ours(json.loads((Path(env["CODEX_HOME"]) / "hooks.json").read_text()), "codex")
    assert sorted(found) == EVENTS
    project = tmp_path / "project"
    project.mkdir()
    install(root, env, "--scope", "project", agent="codex", cwd=project)
    assert sorted(ours(json.loads((project / ".codex" / "hooks.json").read_text()), "codex")) \
        == EVENTS


def test_status_says_what_is_installed_and_whether_it_runs_this_hostcore_and_root(
        root, env, tmp_path):
    def report():
        done = helpers.hostcore(root, env, "hooks", "status", "--json")
        assert done.returncode == 0, done.stderr
        return {r["agent"]: r for r in json.loads(done.stdout)}

    before = report()
    assert before["claude-code"]["installed"] == [] and before["codex"]["missing"] == list(
        TIMEOUTS)
    install(root, env)
    after = report()
    assert after["claude-code"]["installed"] == EVENTS
    assert after["claude-code"]["missing"] == [] and after["claude-code"]["current"] is True
    assert after["codex"]["installed"] == []
    install(tmp_path / "other-root", env)
    assert report()["claude-code"]["current"] is False
    text = helpers.hostcore(root, env, "hooks", "status")
    assert "stale" in text.stdout


def test_the_installed_command_run_by_sh_stores_a_stopped_sessions_rows(root, env):
    install(root, env)
    settings = json.loads(claude_settings(env).read_text())
    command = ours(settings)["Stop"][0]["command"]
    transcript = helpers.claude_transcript(env, "s1", 5)
    payload = json.dumps(helpers.claude_event("Stop", "s1", transcript)).encode()
    done = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, env=env,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.stored_rows(root, env) == 5
