"""Every hook is called one plugin at a time: a plugin whose hook raises is listed as
failed, and the CLI, the other plugins and the tick keep working (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostcore import Host, hookimpl
from hostcore.errors import PluginLoadError
from hostcore.evidence.rows import EvidenceRow
from hostcore.plugin.registration import WorkerResult

RAISING_COMMANDS = """
    import click
    from hostcore import hookimpl

    @hookimpl
    def hostcore_commands(cli):
        @cli.command("half-added")
        def half_added():
            \"\"\"Added just before the hook raised.\"\"\"

        raise RuntimeError("the command hook is broken")
"""

FINE_COMMANDS = """
    import click
    from hostcore import hookimpl

    @hookimpl
    def hostcore_commands(cli):
        @cli.command("greet")
        def greet():
            \"\"\"Say hello from a plugin.\"\"\"
            click.echo("hello from a plugin")
"""

TAKES_BUILT_IN_NAMES = """
    import click
    from hostcore import hookimpl

    @hookimpl
    def hostcore_commands(cli):
        @cli.command("run")
        def run():
            \"\"\"A plugin's own run, which must not replace hostcore's.\"\"\"
            click.echo("the plugin's run")

        @cli.command("export")
        def export():
            \"\"\"A plugin's own export, which must not replace the built-in's.\"\"\"
            click.echo("the plugin's export")

        @cli.command("mine")
        def mine():
            \"\"\"The plugin's command under a name of its own.\"\"\"
            click.echo("mine works")
"""

RAISING_PUBLISHED_REF = """
    from hostcore import hookimpl

    @hookimpl
    def hostcore_published_ref(stream, host, destination):
        raise OSError("the ref hook is broken")
"""

PRINTS = """
    import click
    from hostcore import hookimpl

    @hookimpl
    def hostcore_workers(host):
        print("a plugin printing while it registers")
        return None

    @hookimpl
    def hostcore_commands(cli):
        print("a plugin printing while it adds commands")
"""

EXITS = """
    import sys
    from hostcore import hookimpl

    @hookimpl
    def hostcore_workers(host):
        sys.exit(0)
"""


def hostcore(args: list[str], site: Path, root: Path, load: str, *, site_last: bool = False,
             **extra: str) -> subprocess.CompletedProcess[str]:
    """``hostcore ARGS`` in a new process with the fake site on its path (first, or
    last: its plugins then register after the installed ones), loading only ``load``
    of the installed plugins."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOSTCORE_")}
    env.update(HOSTCORE_ROOT=str(root), HOSTCORE_LOAD_PLUGINS=load, **extra)
    if site_last:
        command = [sys.executable, "-c", f"import sys; sys.path.append({str(site)!r}); "
                   f"from hostcore.__main__ import main; main({args!r})"]
    else:
        env["PYTHONPATH"] = str(site)
        command = [sys.executable, "-m", "hostcore", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def broken_commands(fake_site, tmp_path):
    """A site with fake-raising (its command hook raises) and fake-fine (adds greet)."""
    fake_site.add("fake-raising", {"raising": RAISING_COMMANDS})
    fake_site.add("fake-fine", {"fine": FINE_COMMANDS})
    return fake_site.folder, tmp_path / "root", "fake-raising,fake-fine"


def test_a_raising_command_hook_leaves_help_and_every_other_command_working(broken_commands):
    site, root, load = broken_commands
    helped = hostcore(["--help"], site, root, load)
    assert helped.returncode == 0, helped.stderr
    for command in ("greet", "export", "evidence", "new-plugin", "poll", "run"):
        assert f"  {command} " in helped.stdout
    assert "Traceback" not in helped.stderr
    assert "'raising'" in helped.stderr and "the command hook is broken" in helped.stderr
    greeted = hostcore(["greet"], site, root, load)
    assert (greeted.returncode, greeted.stdout) == (0, "hello from a plugin\n")
    built_in = hostcore(["evidence", "--json"], site, root, load)
    assert built_in.returncode == 0, built_in.stderr
    json.loads(built_in.stdout)


def test_commands_a_plugin_added_before_its_hook_raised_are_taken_back(broken_commands):
    site, root, load = broken_commands
    assert "half-added" not in hostcore(["--help"], site, root, load).stdout
    assert hostcore(["half-added"], site, root, load).returncode == 2  # no such command


def test_plugins_json_lists_the_plugin_whose_command_hook_raised_as_failed(broken_commands):
    site, root, load = broken_commands
    listed = hostcore(["plugins", "--json"], site, root, load)
    assert listed.returncode == 0, listed.stderr
    infos = {i["name"]: i for i in json.loads(listed.stdout)}
    assert infos["raising"]["status"] == "failed"
    assert infos["raising"]["error"] == ("hostcore_commands raised RuntimeError: the command "
                                         "hook is broken")
    assert 'raise RuntimeError("the command hook is broken")' in infos["raising"]["traceback"]
    assert infos["fine"]["status"] == "loaded"
    for flag in ("--traceback", "-v"):
        text = hostcore(["plugins", flag], site, root, load)
        assert "raising: hostcore_commands raised RuntimeError" in text.stdout
        assert "Traceback (most recent call last)" in text.stderr


def test_strict_mode_makes_a_raising_command_hook_fatal(broken_commands):
    site, root, load = broken_commands
    for args in (["--help"], ["greet"], ["plugins", "--json"]):
        result = hostcore(args, site, root, load, HOSTCORE_STRICT_PLUGINS="1")
        assert result.returncode == 1, args
        assert "plugin 'raising' (fake-raising 1.0) failed" in result.stderr
        assert "the command hook is broken" in result.stderr


def test_a_plugin_command_under_a_built_in_name_is_refused_naming_it(fake_site, tmp_path):
    fake_site.add("fake-taker", {"taker": TAKES_BUILT_IN_NAMES})
    site, root = fake_site.folder, tmp_path / "root"
    helped = hostcore(["--help"], site, root, "fake-taker")
    assert helped.returncode == 0
    for name in ("run", "export"):
        assert f"plugin 'taker' adds a command {name!r}" in helped.stderr
    assert "hostcore itself" in helped.stderr
    assert "A plugin's own" not in helped.stdout
    run_help = hostcore(["run", "--help"], site, root, "fake-taker")
    assert "Run the tick loop" in run_help.stdout
    export_help = hostcore(["export", "--help"], site, root, "fake-taker")
    assert "the plugin's export" not in export_help.stdout
    assert "A plugin's own" not in export_help.stdout
    mine = hostcore(["mine"], site, root, "fake-taker")
    assert (mine.returncode, mine.stdout) == (0, "mine works\n")
    # Listing plugins checks the plugins' hooks before the built-ins': still refused.
    listed = hostcore(["plugins", "--json"], site, root, "fake-taker")
    assert {i["name"]: i["status"] for i in json.loads(listed.stdout)}["taker"] == "loaded"


@pytest.fixture
def exporting_root(tmp_path):
    """A root holding three rows, exporting to the directory destination."""
    import hostcore_directory_destination.plugin as directory_plugin

    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{tmp_path / "outbox"}"\n')
    with Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={}) as host:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory="/work/a", payload={"n": i})
                          for i in range(3))
    return root


def test_a_raising_published_ref_is_reported_and_status_still_reports_the_export(
        fake_site, exporting_root):
    fake_site.add("later-ref", {"ref": RAISING_PUBLISHED_REF})
    load = "hostcore-directory-destination,later-ref"
    # The fake site last: its plugin registers after the destination's, so pluggy's
    # order asks it first, before the destination's own answer.
    status = hostcore(["status", "--json"], fake_site.folder, exporting_root, load,
                      site_last=True)
    assert status.returncode == 0, status.stderr
    export = json.loads(status.stdout)["components"]["worker"]["export"]
    assert (export["position"], export["rows_behind"]) == (0, 3)
    assert "plugin 'ref' (later-ref 1.0) failed" in status.stderr
    assert "hostcore_published_ref raised OSError: the ref hook is broken" in status.stderr
    assert "Traceback" not in status.stderr
    strict = hostcore(["status", "--json"], fake_site.folder, exporting_root, load,
                      site_last=True, HOSTCORE_STRICT_PLUGINS="1")
    assert strict.returncode == 1
    assert "the ref hook is broken" in strict.stderr


class RaisingRef:
    __name__ = "raising-ref"

    @hookimpl
    def hostcore_published_ref(self, stream, host, destination):
        raise OSError("the ref hook is broken")


def test_a_raising_published_ref_marks_its_plugin_failed_and_the_next_one_answers(
        exporting_root):
    import hostcore_directory_destination.plugin as directory_plugin

    with Host(root=exporting_root, plugins=[directory_plugin, RaisingRef()],
              load_entrypoints=False, env={}) as host:
        export = host.status()["components"]["worker"]["export"]
        info = host.plugins.infos["raising-ref"]
        assert (export["position"], export["rows_behind"]) == (0, 3)
        assert info.status == "failed"
        assert info.error == "hostcore_published_ref raised OSError: the ref hook is broken"
        assert "OSError" in (info.traceback or "")
        assert host.tick().ok


def test_what_a_plugin_prints_in_its_hooks_never_reaches_hostcores_stdout(
        fake_site, tmp_path):
    fake_site.add("fake-prints", {"prints": PRINTS})
    site, root = fake_site.folder, tmp_path / "root"
    status = hostcore(["status", "--json"], site, root, "fake-prints")
    assert status.returncode == 0
    json.loads(status.stdout)
    assert "a plugin printing while it registers" in status.stderr
    listed = hostcore(["plugins", "--json"], site, root, "fake-prints")
    json.loads(listed.stdout)
    assert "a plugin printing while it adds commands" in listed.stderr
    helped = hostcore(["--help"], site, root, "fake-prints")
    assert helped.stdout.startswith("Usage: ")


def test_sys_exit_in_a_hook_fails_the_plugin_and_the_run_goes_on(fake_site, tmp_path):
    fake_site.add("fake-exits", {"exits": EXITS})
    site, root = fake_site.folder, tmp_path / "root"
    ran = hostcore(["run", "--once"], site, root, "fake-exits")
    assert ran.returncode == 0, ran.stderr
    assert "plugin 'exits' (fake-exits 1.0) failed" in ran.stderr
    assert "SystemExit" in ran.stderr
    listed = hostcore(["plugins", "--json"], site, root, "fake-exits")
    assert {i["name"]: i["status"] for i in json.loads(listed.stdout)}["exits"] == "failed"


class Ingest:
    """A plugin registering a worker under the built-in ingest's name."""

    __name__ = "takes-ingest"

    @hookimpl
    def hostcore_workers(self):
        class Worker:
            name = "ingest"

            def run(self, host):
                return WorkerResult(counts={"impostor": 1})

        return Worker()


def test_a_registration_under_a_built_ins_name_is_refused_and_the_built_in_kept(
        tmp_path, caplog):
    caplog.set_level("WARNING", logger="hostcore.plugin.loader")
    host = Host(root=tmp_path / "root", plugins=[Ingest()], load_entrypoints=False, env={})
    info = host.plugins.infos["takes-ingest"]
    assert info.status == "failed"
    assert "'ingest'" in info.error and "hostcore.evidence.plugin" in info.error
    (ingest,) = [w for w in host.workers if w.name == "ingest"]
    assert type(ingest).__module__.startswith("hostcore.")
    steps = {s.name: s for s in host.tick().steps}
    assert "impostor" not in steps["ingest"].counts
    assert any("'takes-ingest'" in r.getMessage() for r in caplog.records)


def test_a_raising_hook_fails_only_its_plugin_in_process_and_is_fatal_when_strict(tmp_path):
    class RaisingEvents:
        __name__ = "raising-events"

        @hookimpl
        def hostcore_events(self):
            raise ValueError("no catalogue today")

    host = Host(root=tmp_path / "a", plugins=[RaisingEvents()], load_entrypoints=False,
                env={})
    assert host.plugins.infos["raising-events"].status == "failed"
    assert "tick.completed" in host.catalog
    with pytest.raises(PluginLoadError, match="raising-events"):
        Host(root=tmp_path / "b", plugins=[RaisingEvents()], load_entrypoints=False,
             env={"HOSTCORE_STRICT_PLUGINS": "1"})


def test_work_item_receivers_are_called_one_by_one_and_print_to_stderr(tmp_path, capsys):
    from hostcore.workitems.items import WorkItemEvent, WorkItemRef
    from hostcore.workitems.poller import hook_dispatcher

    received: list[str] = []

    class Raises:
        __name__ = "raises-on-events"

        @hookimpl
        def hostcore_work_item_event(self, event):
            raise RuntimeError("cannot take events")

    class Prints:
        __name__ = "prints-events"

        @hookimpl
        def hostcore_work_item_event(self, event):
            print("an event arrived")
            received.append(event.ref.ref)

    with Host(root=tmp_path / "root", plugins=[Prints(), Raises()], load_entrypoints=False,
              env={}) as host:
        event = WorkItemEvent(kind="opened", ref=WorkItemRef("o/r#1"), provider="p",
                              at="2026-01-01T00:00:00Z")
        assert hook_dispatcher(host)(event) == 1  # the raising receiver, counted
        assert received == ["o/r#1"]  # the other still got it
        out, err = capsys.readouterr()
        assert out == "" and "an event arrived" in err
        # The poller retries a failed delivery, so a raising receiver stays loaded.
        assert host.plugins.infos["raises-on-events"].status == "loaded"


def test_a_plugin_command_under_a_declared_built_in_name_is_refused_before_it_loads(caplog):
    import click

    from hostcore.cli.app import build_cli
    from hostcore.plugin.loader import BUILTIN_PLUGINS, load_plugins

    class TakesExport:
        __name__ = "takes-export"

        @hookimpl
        def hostcore_commands(self, cli):
            @cli.command("export")
            def export():
                """Not hostcore's export."""

    plugin_set = load_plugins(BUILTIN_PLUGINS, [TakesExport()], load_entrypoints=False,
                              env={})
    cli = build_cli(plugin_set)
    cli.check_plugin_commands()  # what `hostcore plugins` does: the plugins' hooks only
    assert "export" not in cli.commands  # refused, while hostcore's is not imported yet
    assert any("plugin 'takes-export' adds a command 'export', which hostcore itself already"
               in r.getMessage() for r in caplog.records)
    export = cli.get_command(click.Context(cli), "export")
    assert export is not None and export.help != "Not hostcore's export."


def test_a_built_in_takes_its_command_back_after_plugins_checked_the_plugins_first(caplog):
    # Only a built-in that declares no commands (agents' `hook`, added by its hook) can
    # find its name taken: the plugins' hooks run first under `hostcore plugins`.
    import click

    from hostcore.cli.app import build_cli
    from hostcore.plugin.loader import BUILTIN_PLUGINS, load_plugins

    class TakesHook:
        __name__ = "takes-hook"

        @hookimpl
        def hostcore_commands(self, cli):
            @cli.command("hook")
            def hook():
                """Not hostcore's hook."""

    plugin_set = load_plugins(BUILTIN_PLUGINS, [TakesHook()], load_entrypoints=False,
                              env={})
    cli = build_cli(plugin_set)
    cli.check_plugin_commands()
    assert cli.commands["hook"].help == "Not hostcore's hook."
    cli.list_commands(click.Context(cli))  # then the built-ins' too
    assert cli.commands["hook"].help != "Not hostcore's hook."
    assert any("plugin 'takes-hook' adds a command 'hook', which hostcore itself adds"
               in r.getMessage() for r in caplog.records)
