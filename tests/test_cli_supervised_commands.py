"""``hostcore poll`` and ``hostcore export`` run plugin code as the tick runs a step
(hostcore.steps.run_command_step): a provider or destination that calls
``sys.exit()`` fails the command, never ends it with its own status, and one that
hangs is abandoned past the step's deadline, the command exiting 1 naming it; what
either prints goes to stderr, so ``--json`` is all the command's stdout carries."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hostcore_directory_destination.plugin as directory_plugin
import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.host import Host
from hostcore.plugin.markers import hookimpl

# The folder destination under another name, its push and its registration hook
# replaced by the given lines (indented as the method's and the hook's bodies).
WRAPPED_DESTINATION = """
    import subprocess

    from hostcore import hookimpl
    from hostcore_directory_destination.plugin import destination_for

    class Wrapped:
        def __init__(self, inner):
            self._inner = inner
            self.name = self.key = {name!r}

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def push(self, batch):
{push}

    @hookimpl
    def hostcore_destinations(host):
{register}
        return Wrapped(destination_for(host))
"""

# A push that ends the process, as it asks.
EXITING_DESTINATION = WRAPPED_DESTINATION.format(
    name="exiting", push="            raise SystemExit(0)", register="")
# Prints to stdout when it registers, in each push, and from a child process it
# starts (which writes to file descriptor 1 itself).
PRINTING_DESTINATION = WRAPPED_DESTINATION.format(
    name="printing",
    push='''            print("pushing a batch")
            subprocess.run(["echo", "a child of the push"], check=True)
            return self._inner.push(batch)''',
    register='''        print("registering the printing destination")''')


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test: lets an abandoned step's code return."""
    event = threading.Event()
    yield event
    event.set()


def export_root(tmp_path: Path, rows: int = 3) -> Path:
    """A root of ``rows`` rows, exported 50 a batch to a folder destination."""
    root = tmp_path / "cli-root"
    root.mkdir()
    (root / "hostcore.toml").write_text(
        f'[plugins.directory-destination]\npath = "{tmp_path / "outbox"}"\n'
        "[plugins.export]\nbatch_rows = 50\n")
    host = Host(root=root, plugins=[directory_plugin], load_entrypoints=False, env={})
    try:
        host.store.append(EvidenceRow(partition="sessions", source_id="claude",
                                      directory="/work/a", payload={"n": n})
                          for n in range(rows))
    finally:
        host.close()
    return root


def export_process(tmp_path: Path, fake_site: Any, source: str | None,
                   *args: str) -> subprocess.CompletedProcess[str]:
    """A real ``hostcore export ARGS`` process on :func:`export_root`'s root, with the
    folder destination and the plugin of ``source`` (given at the first call, which
    makes the root)."""
    root = tmp_path / "cli-root"
    if source is not None:
        export_root(tmp_path)
        fake_site.add("fake-wrapped", {"wrapped": source})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(fake_site.folder),
           "HOSTCORE_LOAD_PLUGINS": "fake-wrapped,hostcore-directory-destination"}
    return subprocess.run([sys.executable, "-m", "hostcore", "--root", str(root), "export",
                           *args], capture_output=True, text=True, env=env, timeout=60)


def test_a_destination_that_calls_sys_exit_fails_the_export_naming_it(tmp_path, fake_site):
    # A real hostcore process: before, the plugin's SystemExit(0) was the command's
    # exit status, and cron read a push that never happened as a success.
    done = export_process(tmp_path, fake_site, EXITING_DESTINATION, "--destination", "exiting")
    assert done.returncode == 1, done.stderr
    assert "hostcore export: step 'export' failed: SystemExit: 0" in done.stderr
    # The real folder, exported to afterwards, holds every row: nothing was marked
    # pushed by the one that exited.
    again = export_process(tmp_path, fake_site, None, "--destination", "directory", "--json")
    assert again.returncode == 0, again.stderr
    assert '"rows": 3' in again.stdout


def test_what_a_destination_prints_stays_off_export_json(tmp_path, fake_site):
    # A real process, so the child's write to descriptor 1 is a real one: before,
    # all three lines came out ahead of the JSON and a script reading it failed.
    done = export_process(tmp_path, fake_site, PRINTING_DESTINATION,
                          "--destination", "printing", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 3
    for line in ("registering the printing destination", "pushing a batch",
                 "a child of the push"):
        assert line in done.stderr


class Hanging:
    """A folder destination whose pushes wait until ``release`` is set."""

    def __init__(self, host: Host, release: threading.Event) -> None:
        self._inner = directory_plugin.destination_for(host)
        self._release = release
        self.name, self.key = "hanging", "hanging"
        self.pushes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def push(self, batch: Any) -> Any:
        self.pushes += 1
        if self.pushes > 1:  # the first batch goes out: progress, then none
            self._release.wait()
        return self._inner.push(batch)


def test_a_hung_destination_is_abandoned_once_no_batch_went_out_for_the_deadline(
        tmp_path, hostcore_cli, register_plugin, release, monkeypatch):
    monkeypatch.setattr("hostcore.export.commands.EXPORT_DEADLINE_SECONDS", 0.5)
    export_root(tmp_path, rows=250)
    register_plugin(directory_plugin)

    class Plugin:
        @hookimpl
        def hostcore_destinations(self, host: Host) -> Hanging:
            return Hanging(host, release)

    register_plugin(Plugin())
    result = hostcore_cli("export", "--destination", "hanging")
    assert result.exit_code == 1, result.stderr
    assert ("hostcore export: step 'export' abandoned, 0.5 s without progress; its code is "
            "left running on its thread") in result.stderr


def test_an_export_that_keeps_pushing_outlives_the_deadline(tmp_path, hostcore_cli,
                                                            register_plugin, monkeypatch):
    # The deadline counts from the latest batch, not the start: a long export of a
    # slow destination goes on as long as batches go out.
    monkeypatch.setattr("hostcore.export.commands.EXPORT_DEADLINE_SECONDS", 0.4)
    export_root(tmp_path, rows=500)  # ten batches: a second in all

    class Slow:
        def __init__(self, host: Host) -> None:
            self._inner = directory_plugin.destination_for(host)
            self.name, self.key = "slow", "slow"

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def push(self, batch: Any) -> Any:
            threading.Event().wait(0.1)  # each batch well inside the deadline
            return self._inner.push(batch)

    class Plugin:
        @hookimpl
        def hostcore_destinations(self, host: Host) -> Slow:
            return Slow(host)

    register_plugin(directory_plugin)
    register_plugin(Plugin())
    result = hostcore_cli("export", "--destination", "slow", "--json")
    assert result.exit_code == 0, result.stderr
    assert '"rows": 500' in result.stdout and '"done": true' in result.stdout


def test_a_provider_that_calls_sys_exit_fails_poll_once_naming_it(hostcore_cli,
                                                                  register_plugin,
                                                                  one_item_provider):
    def exits() -> None:
        raise SystemExit(0)

    register_plugin(one_item_provider(exits))
    result = hostcore_cli("poll", "--once")
    assert result.exit_code == 1, result.stderr
    assert "hostcore: step 'poll' failed: SystemExit: 0" in result.stderr


def test_what_a_provider_prints_stays_off_poll_json(hostcore_cli, register_plugin,
                                                    one_item_provider):
    def prints() -> None:
        print("listing from the provider")

    register_plugin(one_item_provider(prints))
    result = hostcore_cli("poll", "--once", "--json")
    assert result.exit_code == 0, result.stderr
    assert [summary["new"] for summary in json.loads(result.stdout)] == [1]
    assert "listing from the provider" in result.stderr


def test_a_hung_provider_is_abandoned_past_the_poll_deadline(
        hostcore_cli, register_plugin, one_item_provider, release, monkeypatch, tmp_path):
    monkeypatch.setattr("hostcore.workitems.plugin.POLL_DEADLINE_SECONDS", 0.5)
    root = tmp_path / "cli-root"
    root.mkdir()
    (root / "hostcore.toml").write_text("[poll]\ncycle_budget_seconds = 0.1\n")
    register_plugin(one_item_provider(release.wait))
    result = hostcore_cli("poll", "--once")
    assert result.exit_code == 1, result.stderr
    assert ("hostcore: step 'poll' abandoned, still running past its deadline of 0.5 s; "
            "its code is left running on its thread") in result.stderr
