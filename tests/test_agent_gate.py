"""The staleness gate in an agent's loop: the real ``hostcore hook`` console script, fed
Claude Code's and Codex's hook payloads on stdin, against a real git repository and a
real root. A PostToolUse of a file-writing tool stamps what it wrote; a Stop exits 2,
naming each file of the session whose governance moved, so the agent keeps working."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hostcore.agents.events import decode_event

_spec = importlib.util.spec_from_file_location(
    "agent_hook_helpers", Path(__file__).with_name("agent_hook_helpers.py"))
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)


@pytest.fixture
def env(tmp_path):
    return helpers.agent_env(tmp_path)


@pytest.fixture
def root(tmp_path, env):
    """A root with hostcore's hooks installed, as an agent's user has it (installing
    makes the plugin index the hooks read)."""
    made = tmp_path / "root"
    made.mkdir(mode=0o700)
    done = helpers.hostcore(made, env, "hooks", "install", "--agent", "claude-code")
    assert done.returncode == 0, done.stderr
    return made


@pytest.fixture
def repo(tmp_path):
    """A git repository with CLAUDE.md at its top, src/a.py under it, and a sibling
    folder docs/ with a CLAUDE.md of its own."""
    made = tmp_path / "repo"
    made.mkdir()
    subprocess.run(["git", "init", "-q", str(made)], check=True, timeout=60)
    (made / "CLAUDE.md").write_text("Indent with tabs.\n")
    (made / "src").mkdir()
    (made / "src" / "a.py").write_text("x = 1\n")
    (made / "docs").mkdir()
    (made / "docs" / "CLAUDE.md").write_text("Write in British English.\n")
    return made


def _event(name: str, repo: Path, session: str = "s1", **fields: Any) -> dict[str, Any]:
    return helpers.claude_event(name, session, None, cwd=str(repo), **fields)


def _write(repo: Path, path: str, session: str = "s1", tool: str = "Write"
           ) -> dict[str, Any]:
    """A PostToolUse of Claude Code's ``tool`` that wrote ``path`` (as Claude Code names
    it: absolute)."""
    target = str(repo / path)
    tool_input: dict[str, Any] = {"file_path": target, "content": "x = 1\n"}
    return _event("PostToolUse", repo, session, tool_name=tool, tool_use_id="toolu_1",
                  tool_input=tool_input, tool_response={"type": "create", "filePath": target})


def _stop(repo: Path, session: str = "s1", *, active: bool = False) -> dict[str, Any]:
    return _event("Stop", repo, session, stop_hook_active=active,
                  last_assistant_message="Done.")


def _check(root: Path, env: dict[str, str], repo: Path) -> dict[str, tuple[str, list[str]]]:
    """``hostcore check --json`` in ``repo``: each target's status and what moved, by
    repository-relative path."""
    done = helpers.hostcore(root, env, "check", "--json", cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    return {Path(t["path"]).relative_to(repo.resolve()).as_posix(): (t["status"], t["moved"])
            for t in json.loads(done.stdout)["targets"]}


def test_a_post_tool_use_write_stamps_the_file_it_wrote_and_exits_0(root, env, repo):
    done = helpers.hook(root, env, _write(repo, "src/a.py"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert _check(root, env, repo) == {"src/a.py": ("current", [])}
    assert helpers.hook_faults(root, env) == {}


def test_edit_multiedit_and_a_bash_tool_call_stamp_only_the_edited_files(root, env, repo):
    (repo / "src" / "b.py").write_text("y = 2\n")
    assert helpers.hook(root, env, _write(repo, "src/a.py", tool="Edit")).returncode == 0
    assert helpers.hook(root, env, _write(repo, "src/b.py", tool="MultiEdit")).returncode == 0
    bash = _event("PostToolUse", repo, tool_name="Bash", tool_use_id="toolu_2",
                  tool_input={"command": f"touch {repo / 'src' / 'c.py'}"})
    (repo / "src" / "c.py").write_text("")
    assert helpers.hook(root, env, bash).returncode == 0
    assert sorted(_check(root, env, repo)) == ["src/a.py", "src/b.py"]


def test_codex_apply_patch_stamps_each_file_the_patch_added_or_updated(root, env, repo):
    (repo / "src" / "new.py").write_text("z = 3\n")
    patch = ("*** Begin Patch\n*** Add File: src/new.py\n+z = 3\n"
             "*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n")
    payload = {"hook_event_name": "PostToolUse", "session_id": "c1", "cwd": str(repo),
               "transcript_path": None, "model": "gpt-5", "tool_name": "apply_patch",
               "tool_use_id": "call_1", "tool_input": {"command": patch},
               "tool_response": "Success."}
    done = helpers.hook(root, env, payload, "codex")
    assert (done.returncode, done.stdout) == (0, b"")
    assert _check(root, env, repo) == {"src/a.py": ("current", []),
                                       "src/new.py": ("current", [])}


def test_stop_exits_2_naming_each_stale_file_and_context_when_its_claude_md_changed(
        root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")

    done = helpers.hook(root, env, _stop(repo))
    assert done.returncode == 2
    assert done.stdout == b""
    message = done.stderr.decode()
    assert "- src/a.py: context moved" in message
    assert str(repo) not in message  # repository-relative, as the model works in it
    # Enforcing is not reporting: the stale stamp stays for `check`, and no fault.
    assert _check(root, env, repo) == {"src/a.py": ("stale", ["context"])}
    assert helpers.hook_faults(root, env) == {}


def test_stop_exits_0_when_only_a_sibling_folders_claude_md_changed(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "docs" / "CLAUDE.md").write_text("Write in American English.\n")
    done = helpers.hook(root, env, _stop(repo))
    assert (done.returncode, done.stderr) == (0, b"")


def test_stop_with_stop_hook_active_exits_0_even_with_a_stale_file(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")
    assert helpers.hook(root, env, _stop(repo)).returncode == 2
    # The agent went on because of the gate and stops again: it is let go.
    again = helpers.hook(root, env, _stop(repo, active=True))
    assert (again.returncode, again.stderr) == (0, b"")


def test_stop_gates_only_the_files_its_own_session_wrote(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py", session="s1")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")
    assert helpers.hook(root, env, _stop(repo, session="s2")).returncode == 0
    assert helpers.hook(root, env, _stop(repo, session="s1")).returncode == 2


def test_a_file_rewritten_under_the_new_governance_clears_the_gate(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")
    assert helpers.hook(root, env, _write(repo, "src/a.py", tool="Edit")).returncode == 0
    assert helpers.hook(root, env, _stop(repo)).returncode == 0


def test_a_file_deleted_after_it_was_written_is_named_as_deleted(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "src" / "a.py").unlink()
    done = helpers.hook(root, env, _stop(repo))
    assert done.returncode == 2
    assert "- src/a.py: deleted since you wrote it" in done.stderr.decode()


def test_gate_false_in_the_config_lets_the_agent_stop_with_a_stale_file(root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")
    (root / "hostcore.toml").write_text("[plugins.governance]\ngate = false\n")
    done = helpers.hook(root, env, _stop(repo))
    assert done.returncode == 0
    assert b"src/a.py" not in done.stderr


def test_files_outside_any_repository_or_gone_are_skipped_and_counted(root, env, repo,
                                                                        tmp_path):
    outside = tmp_path / "scratch"
    outside.mkdir()
    (outside / "notes.txt").write_text("n\n")
    payloads = [_write(outside, "notes.txt"), _write(repo, "src/gone.py"),
                _write(repo, "src/a.py")]
    for payload in payloads:
        done = helpers.hook(root, env, payload)
        assert (done.returncode, done.stdout) == (0, b"")
        assert b"notes.txt" not in done.stderr and b"gone.py" not in done.stderr
    assert _check(root, env, repo) == {"src/a.py": ("current", [])}
    assert helpers.hook_faults(root, env) == {"stamp_outside_repository": 1,
                                              "stamp_target_gone": 1}


def test_a_gate_that_fails_exits_0_and_is_counted_and_the_stop_ingest_still_runs(
        root, env, repo):
    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    (repo / "CLAUDE.md").write_text("Indent with four spaces.\n")
    # The stamp store is no database any more: the gate cannot judge, so it never blocks.
    stamps = root / "governance" / "stamps.sqlite3"
    for leftover in stamps.parent.glob("stamps.sqlite3-*"):
        leftover.unlink()
    stamps.write_bytes(b"this is not an SQLite database" * 100)
    transcript = helpers.claude_transcript(env, "s1", 12)
    stop = _stop(repo)
    stop["transcript_path"] = str(transcript)

    done = helpers.hook(root, env, stop)
    assert (done.returncode, done.stdout) == (0, b"")
    assert helpers.hook_faults(root, env) == {"gate_failed": 1}
    assert helpers.stored_rows(root, env) == 12


_GLOSSARY_PLUGIN = """
    import hashlib

    from hostcore import hookimpl


    @hookimpl
    def hostcore_governance_inputs(target_dir, repo_root, host):
        if target_dir != repo_root:
            return None  # a repository-wide input: said once, at the root
        glossary = repo_root / "GLOSSARY"
        return {"terms": {"GLOSSARY": hashlib.sha256(glossary.read_bytes()).hexdigest()}}
"""


def test_a_plugin_contributing_governing_inputs_governs_the_hooks_stamps_as_it_does_check(
        tmp_path, repo, fake_site):
    # Installed as an entry point, it implements no agent hook: the hook must still load
    # it wherever the gate resolves governance, or its stamps would lack its part.
    fake_site.add("hostcore-glossary", {"glossary": _GLOSSARY_PLUGIN})
    env = helpers.agent_env(tmp_path, PYTHONPATH=str(fake_site.folder),
                            HOSTCORE_LOAD_PLUGINS="claude-code,codex,glossary")
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    assert helpers.hostcore(root, env, "hooks", "install", "--agent",
                            "claude-code").returncode == 0
    (repo / "GLOSSARY").write_text("gate: a check that can stop an agent\n")

    assert helpers.hook(root, env, _write(repo, "src/a.py")).returncode == 0
    assert _check(root, env, repo) == {"src/a.py": ("current", [])}
    (repo / "GLOSSARY").write_text("gate: a check that asks an agent to go on\n")
    done = helpers.hook(root, env, _stop(repo))
    assert done.returncode == 2
    assert "- src/a.py: terms moved" in done.stderr.decode()


def test_the_written_paths_are_what_the_tool_wrote_taken_against_cwd():
    def written(agent: str, tool: str, tool_input: object, name: str = "PostToolUse"
                ) -> tuple[str, ...]:
        data = json.dumps({"hook_event_name": name, "session_id": "s", "cwd": "/w",
                           "tool_name": tool, "tool_input": tool_input}).encode()
        return decode_event(data, agent, budget_seconds=0.0).written  # type: ignore[arg-type]

    patch = ("*** Begin Patch\n*** Add File: new.py\n+a\n*** Update File: /abs/old.py\n"
             "*** Move to: moved.py\n@@\n-a\n+b\n*** Delete File: gone.py\n*** End Patch\n")
    assert written("codex", "apply_patch", {"command": patch}) == (
        "/w/new.py", "/abs/old.py", "/w/moved.py")
    assert written("claude-code", "NotebookEdit", {"notebook_path": "n.ipynb"}) == ("/w/n.ipynb",)
    assert written("claude-code", "Write", {"file_path": "/w/a.py", "content": "x"}) == (
        "/w/a.py",)
    # Another tool, another event, or an input of another shape: nothing written.
    assert written("claude-code", "Read", {"file_path": "/w/a.py"}) == ()
    assert written("claude-code", "Write", {"file_path": "/w/a.py"}, "PreToolUse") == ()
    assert written("claude-code", "Write", ["not", "an", "object"]) == ()
    assert written("claude-code", "Write", {"file_path": 7}) == ()
