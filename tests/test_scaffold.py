"""`hostcore new-plugin`: the package it writes installs, passes its own tests and loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore.plugin.loader import BUILTIN_PLUGINS
from hostcore.scaffold.create import KINDS, create_plugin

# One plugin per kind; the provider is the issue's own example, `demo`.
PLUGINS = {"provider": "demo", "source": "demo-source", "policy_input": "demo-policy",
           "telemetry_sink": "demo-sink", "worker": "demo-worker",
           "destination": "demo-destination", "command": "demo-command"}
LINT = ["--select", "E,F,W,I,B,UP,SIM,RUF", "--ignore", "RUF012,B008", "--line-length", "100",
        "--target-version", "py311"]


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None):
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_new_plugin_of_every_kind_installs_passes_its_tests_and_is_listed(tmp_path,
                                                                           outer_venv):
    work = tmp_path / "work"
    work.mkdir()
    for kind, name in PLUGINS.items():
        run(sys.executable, "-m", "hostcore", "new-plugin", name, "--kind", kind, cwd=work)
    folders = [work / f"hostcore-{name}" for name in PLUGINS.values()]

    python = outer_venv(tmp_path / "venv")
    editable = [arg for folder in folders for arg in ("-e", folder)]
    # The outer interpreter's pip installs into the venv: no network, no build isolation.
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
        "--no-build-isolation", *editable)

    tests = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *folders, cwd=work)
    assert " passed" in tests.stdout and "failed" not in tests.stdout

    env = {**os.environ, "HOSTCORE_LOAD_PLUGINS": ",".join(f"hostcore-{n}"
                                                           for n in PLUGINS.values())}
    listed = run(python, "-m", "hostcore", "--root", tmp_path / "root", "plugins", "--json",
                 env=env)
    infos = {info["name"]: info for info in json.loads(listed.stdout)}
    for kind, name in PLUGINS.items():
        info = infos[name]
        assert (info["status"], info["distribution"]) == ("loaded", f"hostcore-{name}")
        # One spelling per kind: --kind, the registration kind and `plugins --json` agree.
        expected = [] if kind == "command" else [(kind, name)]  # a command registers nothing
        assert [(r["kind"], r["name"]) for r in info["registrations"]] == expected

    command = run(python, "-m", "hostcore", "--root", tmp_path / "root", "demo-command",
                  "--json", env=env)
    assert json.loads(command.stdout)["plugins"]["loaded"] == len(PLUGINS)

    once = subprocess.run([python, "-m", "hostcore", "--root", tmp_path / "root", "run",
                           "--once"], env=env, capture_output=True, text=True, timeout=120)
    assert once.returncode == 0, once.stderr


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_generated_package_is_lint_clean(tmp_path, kind):
    target, _ = create_plugin("lint-me", kind, tmp_path / "pkg")
    run(sys.executable, "-m", "ruff", "check", "--no-cache", *LINT, ".", cwd=target)


def test_new_plugin_writes_the_package_and_lists_its_files(hostcore_cli, tmp_path):
    target = tmp_path / "out"
    result = hostcore_cli("new-plugin", "task-board", "--kind", "provider", "--dir",
                          str(target), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["distribution"] == "hostcore-task-board"
    assert report["package"] == "hostcore_task_board"
    assert sorted(report["files"]) == sorted(
        str(p) for p in target.rglob("*") if p.is_file()
        for p in [p.relative_to(target)])
    pyproject = (target / "pyproject.toml").read_text()
    assert 'task-board = "hostcore_task_board.plugin"' in pyproject
    assert "class TaskBoard:" in (target / "hostcore_task_board" / "plugin.py").read_text()
    assert "ProviderConformance" in (target / "tests" / "test_hostcore_task_board.py").read_text()


def test_the_default_folder_is_hostcore_name_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target, files = create_plugin("notes", "source")
    assert target == tmp_path / "hostcore-notes"
    assert Path("hostcore_notes/plugin.py") in files


def test_an_occupied_folder_is_refused_and_left_untouched(hostcore_cli, tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    result = hostcore_cli("new-plugin", "demo", "--dir", str(target))
    assert result.exit_code == 2
    assert "already exists and is not an empty folder; nothing was written" in result.stderr
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_an_empty_folder_is_filled(tmp_path):
    target = tmp_path / "empty"
    target.mkdir()
    create_plugin("demo", "telemetry_sink", target)
    assert (target / "hostcore_demo" / "plugin.py").exists()


@pytest.mark.parametrize("name", ["Demo", "demo_plugin", "-demo", "demo-", "9lives", "a--b",
                                  "x" * 41, ""])
def test_a_bad_name_is_refused_naming_it(hostcore_cli, tmp_path, name):
    result = hostcore_cli("new-plugin", "--dir", str(tmp_path / "pkg"), "--", name)
    assert result.exit_code == 2
    assert f"plugin name {name!r} must be lowercase" in result.stderr
    assert not (tmp_path / "pkg").exists()


def test_an_unknown_kind_is_refused_by_the_command_line(hostcore_cli, tmp_path):
    result = hostcore_cli("new-plugin", "demo", "--kind", "exporter", "--dir",
                          str(tmp_path / "pkg"))
    assert result.exit_code == 2
    assert "'exporter' is not one of" in result.stderr
    assert not (tmp_path / "pkg").exists()


def test_the_next_steps_install_the_test_extra_the_tests_need(hostcore_cli, tmp_path):
    result = hostcore_cli("new-plugin", "demo", "--dir", str(tmp_path / "pkg"))
    assert result.exit_code == 0, result.stderr
    assert f"pip install -e '{tmp_path / 'pkg'}[test]'" in result.stdout
    assert "[project.optional-dependencies]\ntest = " in (tmp_path / "pkg" /
                                                          "pyproject.toml").read_text()


def test_every_registration_kind_has_a_scaffold_spelt_the_same(hostcore_cli, tmp_path):
    from hostcore.plugin.registration import KINDS as REGISTRATION_KINDS

    # Every registration kind, and one kind that registers nothing: a command.
    assert set(KINDS) == {*REGISTRATION_KINDS, "command"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_package_of_every_kind_and_its_tests_pass_mypy_strict(tmp_path, kind):
    target, files = create_plugin("typed", kind, tmp_path / "pkg")
    assert Path("tests/test_hostcore_typed.py") in files
    # The tests folder too: an author's CI checks what the scaffold wrote, all of it.
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "hostcore_typed", "tests"], cwd=target, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout
    # mypy saw every module written, the tests' among them.
    modules = sum(f.suffix == ".py" for f in files)
    assert f"no issues found in {modules} source files" in done.stdout, done.stdout


def test_a_command_plugin_passes_mypy_strict_and_its_own_tests(tmp_path):
    target, files = create_plugin("notes", "command", tmp_path / "pkg")
    assert Path("hostcore_notes/command.py") in files
    run(sys.executable, "-m", "mypy", "--strict", "--no-incremental", "hostcore_notes",
        "tests", cwd=target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    tests = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
                cwd=target, env={**env, "PYTHONPATH": str(target)})
    assert "7 passed" in tests.stdout


def test_new_plugin_writes_a_command_that_runs_in_the_host(hostcore_cli, register_plugin,
                                                            tmp_path, monkeypatch):
    target = tmp_path / "pkg"
    assert hostcore_cli("new-plugin", "notes-in-host", "--kind", "command", "--dir",
                        str(target)).exit_code == 0
    monkeypatch.syspath_prepend(str(target))
    import hostcore_notes_in_host.plugin

    register_plugin(hostcore_notes_in_host.plugin)
    result = hostcore_cli("notes-in-host")
    assert result.exit_code == 0, result.stderr
    # Every built-in (their number grows with hostcore), and this plugin alone loaded.
    assert f"builtin: {len(BUILTIN_PLUGINS)}\n" in result.stdout, result.stdout
    assert "loaded: 1\n" in result.stdout, result.stdout


def test_the_spellings_of_0_1_still_work_with_a_note(hostcore_cli, tmp_path):
    result = hostcore_cli("new-plugin", "demo", "--kind", "sink", "--dir",
                          str(tmp_path / "pkg"), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == "telemetry_sink"
    assert "--kind sink is now spelt telemetry_sink" in result.stderr
