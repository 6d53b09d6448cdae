"""The CLI's promises: exit codes 0/1/2, --json keys, failures named, sinks never fatal."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from hostcore import __version__, hookimpl
from hostcore.plugin.registration import WorkerResult


class Workers:
    """A plugin registering the given worker objects."""

    def __init__(self, name: str, *workers: object) -> None:
        self.__name__ = name
        self.workers = workers

    @hookimpl
    def hostcore_workers(self):
        return self.workers


class Failing:
    name = "exploder"
    order = 10

    def run(self, host):
        raise OSError("disk on fire")


class Fine:
    name = "fine"
    order = 20

    def run(self, host):
        return WorkerResult(pending=True, counts={"done": 3})


class RaisingSink:
    name = "raising-sink"

    def receive(self, event):
        raise ValueError("sink broke")


class SinkPlugin:
    __name__ = "sink-plugin"

    @hookimpl
    def hostcore_telemetry_sinks(self):
        return RaisingSink()


def write_config(tmp_path, text):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "hostcore.toml").write_text(text)
    return root


def test_version_is_printed_and_exits_0(hostcore_cli):
    result = hostcore_cli("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_run_once_with_no_plugin_exits_0(hostcore_cli):
    result = hostcore_cli("run", "--once")
    assert result.exit_code == 0, result.stderr
    assert "tick ok" in result.stderr


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[run]\ninterval_secs = 5\n", "`run.interval_secs`"),
        ("[rnu]\ninterval_seconds = 5\n", "`rnu`"),
        ("[run]\ninterval_seconds = -1\n", "`run.interval_seconds`"),
        ("[poll]\ninterval_seconds = 'soon'\n", "`poll.interval_seconds`"),
        ("[run\n", "not valid TOML"),
    ],
)
def test_bad_config_exits_2_naming_the_key(hostcore_cli, tmp_path, toml, named):
    root = write_config(tmp_path, toml)
    result = hostcore_cli("run", "--once", root=root)
    assert result.exit_code == 2
    assert named in result.stderr
    assert str(root / "hostcore.toml") in result.stderr


def test_missing_explicit_config_file_exits_2(hostcore_cli, tmp_path):
    result = hostcore_cli("--config", str(tmp_path / "nope.toml"), "config")
    assert result.exit_code == 2
    assert "nope.toml" in result.stderr


def test_help_works_even_with_a_bad_config(hostcore_cli, tmp_path):
    root = write_config(tmp_path, "[run]\nbogus = 1\n")
    result = hostcore_cli("run", "--help", root=root)
    assert result.exit_code == 0
    assert "--once" in result.stdout


def test_run_once_exits_1_naming_the_failing_worker(hostcore_cli, register_plugin):
    register_plugin(Workers("workers", Failing(), Fine()))
    result = hostcore_cli("run", "--once")
    assert result.exit_code == 1
    assert "step 'exploder' failed: OSError: disk on fire" in result.stderr
    assert "fine" not in result.stderr.split("failed:")[0]


def test_run_once_json_reports_every_step(hostcore_cli, register_plugin):
    register_plugin(Workers("workers", Failing(), Fine()))
    result = hostcore_cli("run", "--once", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert set(report) == {"ok", "pending", "steps", "duration_ms"}
    assert (report["ok"], report["pending"]) == (False, True)
    mine = [s for s in report["steps"] if s["name"] in ("exploder", "fine")]
    assert [(s["name"], s["ok"]) for s in mine] == [("exploder", False), ("fine", True)]
    assert mine[1]["counts"] == {"done": 3}


def test_a_raising_sink_does_not_fail_the_tick_and_is_counted(make_host, caplog,
                                                               collected_events):
    caplog.set_level(logging.WARNING, logger="hostcore.telemetry")
    host = make_host(SinkPlugin(), Workers("workers", Fine()))
    for _ in range(3):
        assert host.tick().ok
    emitted = len(collected_events.events)
    assert collected_events.names().count("tick.completed") == 3
    # Every event emitted so far raised in the sink, and each was counted.
    assert host.telemetry.sink_failures == {"raising-sink": emitted}
    failures = host.status()["telemetry"]["sink_failures"]
    # status() may itself emit (a component reporting), so count again after it.
    assert failures == {"raising-sink": len(collected_events.events)}
    warnings = [r for r in caplog.records if "raising-sink" in r.getMessage()]
    assert len(warnings) == 1, "logged once per sink, then only counted"


def test_a_raising_sink_leaves_other_sinks_served(make_host, collected_events):
    host = make_host(SinkPlugin())
    host.tick()
    assert {"plugins.loaded", "tick.completed"} <= set(collected_events.names())


def test_cli_run_once_with_a_raising_sink_exits_0(hostcore_cli, register_plugin):
    register_plugin(SinkPlugin())
    result = hostcore_cli("run", "--once")
    assert result.exit_code == 0, result.stderr


def test_plugins_json_has_the_documented_keys(hostcore_cli, register_plugin):
    register_plugin(Workers("workers", Fine()))
    result = hostcore_cli("plugins", "--json")
    assert result.exit_code == 0
    infos = {i["name"]: i for i in json.loads(result.stdout)}
    assert set(infos["workers"]) == {"name", "distribution", "version", "status", "hooks",
                                     "registrations", "error", "traceback",
                                     "requires_hostcore", "hook_api"}
    assert infos["workers"]["registrations"] == [
        {"kind": "worker", "name": "fine", "available": True, "reason": None}]
    assert infos["hostcore.plugin.core"]["status"] == "builtin"


def test_status_json_reports_components(hostcore_cli, register_plugin):
    class Reporting(Fine):
        def status(self):
            return {"queued": 7}

        def availability(self):
            return "the frobnicator is not installed"

    register_plugin(Workers("workers", Reporting()))
    result = hostcore_cli("status", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert set(report) == {"root", "components", "last_tick", "telemetry"}
    assert report["components"]["worker"]["fine"] == {
        "available": False, "reason": "the frobnicator is not installed", "queued": 7}


def test_config_json_shows_the_effective_settings_and_source(hostcore_cli, tmp_path):
    root = write_config(tmp_path, "[run]\ninterval_seconds = 7\n")
    result = hostcore_cli("config", "--json", root=root)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["source"] == str(root / "hostcore.toml")
    assert data["settings"]["run"]["interval_seconds"] == 7.0
    assert data["settings"]["poll"]["interval_seconds"] == 60.0


def run_hostcore(args, env, timeout=60):
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "hostcore", *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def test_strict_mode_cli_exits_nonzero_naming_the_plugin(tmp_path, fake_site, plugin_sources):
    fake_site.add("fake-broken", {"broken": plugin_sources("broken")})
    env = {"PYTHONPATH": str(fake_site.folder), "HOSTCORE_LOAD_PLUGINS": "fake-broken"}
    root = str(tmp_path / "root")

    lenient = run_hostcore(["--root", root, "run", "--once"], env)
    assert lenient.returncode == 0, lenient.stderr
    # Warned about in the CLI's own voice (logging is set up before plugins load),
    # then skipped.
    assert "hostcore: WARNING: plugin 'broken'" in lenient.stderr

    strict = run_hostcore(["--root", root, "run", "--once"],
                          {**env, "HOSTCORE_STRICT_PLUGINS": "1"})
    assert strict.returncode == 1
    assert "plugin 'broken' (fake-broken 1.0) failed" in strict.stderr
    assert "the broken plugin cannot start" in strict.stderr


def test_the_hosts_own_commands_do_not_import_what_plugin_commands_need(tmp_path):
    """`status` must not pay for `export`, `poll` or `custody` (a cold-start cost)."""
    import subprocess
    import sys

    script = ("import sys; from hostcore.cli.app import run_cli; "
              f"run_cli(['--root', {str(tmp_path / 'r')!r}, 'status', '--json']); "
              "print([m for m in ('hostcore.export.commands', 'hostcore.workitems.commands',"
              " 'hostcore.evidence.commands', 'hostcore_file_custody.commands')"
              " if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "[]"
