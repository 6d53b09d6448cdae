"""hostcore-task-folder: the provider conformance suite, the provider's behaviour, and the
poller driving it end to end through a host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
import task_folder_provider.plugin as task_folder

from hostcore import ConfigError, hookimpl
from hostcore.testing import ProviderConformance
from hostcore.workitems.items import ProviderError, WorkItemRef


def write_task(folder, task_id, state="open", title="A task"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task_id}.toml").write_text(f'title = "{title}"\nstate = "{state}"\n')


A_DAY_AGO = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
CONFIG = {"plugins": {"task-folder": {"folders": {"inbox": "tasks/inbox",
                                                  "work": "tasks/work"}}}}


class TestTaskFolderConformance(ProviderConformance):
    @pytest.fixture
    def plugin(self):
        return task_folder

    @pytest.fixture
    def plugin_config(self):
        return CONFIG

    @pytest.fixture
    def seed_items(self):
        def seed(host):
            write_task(host.root / "tasks" / "inbox", "triage")
            write_task(host.root / "tasks" / "work", "release-notes")
            write_task(host.root / "tasks" / "work", "old", state="done")
        return seed

    @pytest.fixture
    def break_backend(self):
        def unplug(host):
            for folder in ("inbox", "work"):
                for path in (host.root / "tasks" / folder).iterdir():
                    path.unlink()
                (host.root / "tasks" / folder).rmdir()
        return unplug


@pytest.fixture
def provider(make_host):
    host = make_host(task_folder, config=CONFIG)
    return host, next(p for p in host.providers if p.name == "task-folder")


def test_open_tasks_are_listed_per_folder_and_closed_ones_answer_with_a_reason(provider):
    host, tasks = provider
    write_task(host.root / "tasks" / "inbox", "triage")
    write_task(host.root / "tasks" / "work", "shipped", state="done")
    write_task(host.root / "tasks" / "work", "idea", state="dropped")
    listing = tasks.list_items()
    assert {s.scope: s.status for s in listing.scopes} == {"inbox": "complete",
                                                          "work": "complete"}
    assert [i.ref.ref for i in listing.items] == ["task:inbox/triage"]
    done = tasks.closure(WorkItemRef("task:work/shipped"))
    dropped = tasks.closure(WorkItemRef("task:work/idea"))
    assert (done.state, done.state_reason) == ("closed", "completed")
    assert (dropped.state, dropped.state_reason) == ("closed", "not_planned")


def test_an_unreadable_task_file_interrupts_its_folder_only(provider):
    host, tasks = provider
    write_task(host.root / "tasks" / "inbox", "fine")
    write_task(host.root / "tasks" / "work", "fine-too")
    (host.root / "tasks" / "work" / "broken.toml").write_text("title = ")
    statuses = {s.scope: s for s in tasks.list_items().scopes}
    assert statuses["inbox"].status == "complete"
    assert statuses["work"].status == "interrupted"
    assert "broken.toml" in statuses["work"].reason
    assert [i.ref.ref for i in statuses["work"].items] == ["task:work/fine-too"]
    with pytest.raises(ProviderError, match="broken"):
        tasks.closure(WorkItemRef("task:work/broken"))


def test_a_deleted_task_file_is_no_answer_not_a_closure(provider):
    host, tasks = provider
    write_task(host.root / "tasks" / "work", "gone")
    (host.root / "tasks" / "work" / "gone.toml").unlink()
    with pytest.raises(ProviderError, match="deleted or moved"):
        tasks.closure(WorkItemRef("task:work/gone"))


@pytest.mark.parametrize("ref", ["task:work/../secrets", "task:work/.hidden", "task:nope/x",
                                 "task:work", "gh:owner/repo#1"])
def test_refs_outside_the_configured_folders_are_not_owned_or_answered(provider, ref):
    _, tasks = provider
    assert tasks.owns(WorkItemRef(ref)) is False
    with pytest.raises(ProviderError):
        tasks.closure(WorkItemRef(ref))


def test_without_folders_the_provider_is_unavailable_and_says_what_to_set(make_host):
    host = make_host(task_folder)
    entry = host.status()["components"]["provider"]["task-folder"]
    assert entry["available"] is False
    assert "[plugins.task-folder]" in entry["reason"]


def test_a_scope_name_with_a_slash_is_a_config_error_naming_the_table(make_host):
    with pytest.raises(ConfigError, match=r"\[plugins.task-folder\]"):
        make_host(task_folder, config={"plugins": {"task-folder": {"folders": {"a/b": "x"}}}})


class Listener:
    def __init__(self):
        self.events = []

    @hookimpl
    def hostcore_work_item_event(self, event):
        self.events.append((event.kind, event.ref.ref))


def test_the_poller_reports_a_task_opening_and_being_done(make_host):
    listener = Listener()
    config = {**CONFIG, "poll": {"interval_seconds": 0.001}}
    host = make_host(task_folder, listener, config=config)
    work = host.root / "tasks" / "work"
    write_task(work, "release-notes")
    (host.root / "tasks" / "inbox").mkdir(parents=True)
    assert host.tick().ok
    write_task(work, "release-notes", state="done")
    # A done task leaves the listing; the poller asks about an unlisted poll-only
    # record once it has been absent for the ledger-only window (measured on the
    # ledger's second-precision timestamps), so date the last sighting a day back.
    host.ledger.update("task:work/release-notes", lambda record: msgspec.structs.replace(
        record, poll=msgspec.structs.replace(record.poll, last_polled_at=A_DAY_AGO)))
    assert host.tick().ok
    assert listener.events == [("opened", "task:work/release-notes"),
                               ("closed", "task:work/release-notes")]


def test_a_vanished_folder_closes_nothing(make_host):
    listener = Listener()
    config = {**CONFIG, "poll": {"interval_seconds": 0.001}}
    host = make_host(task_folder, listener, config=config)
    write_task(host.root / "tasks" / "work", "keep-me")
    write_task(host.root / "tasks" / "inbox", "me-too")
    host.tick()
    (host.root / "tasks" / "work" / "keep-me.toml").unlink()
    (host.root / "tasks" / "work").rmdir()
    host.tick()
    host.tick()
    assert ("closed", "task:work/keep-me") not in listener.events
    assert listener.events == [("opened", "task:inbox/me-too"), ("opened", "task:work/keep-me")]


def test_installed_but_unconfigured_it_is_reported_unconfigured_and_poll_once_exits_0(
        tmp_path):
    # The README's quickstart venv: the example is installed, nobody configured it.
    env = {**os.environ, "HOSTCORE_ROOT": str(tmp_path / "root"),
           "HOSTCORE_LOAD_PLUGINS": "hostcore-task-folder"}

    def hostcore(*args):
        return subprocess.run([sys.executable, "-m", "hostcore", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    polled = hostcore("poll", "--once", "--json")
    assert polled.returncode == 0, polled.stderr
    (summary,) = json.loads(polled.stdout)
    assert summary["provider"] == "task-folder" and summary["configured"] is False
    assert "task-folder: unconfigured" in hostcore("poll", "--once").stderr
    status = json.loads(hostcore("status", "--json").stdout)
    assert status["components"]["provider"]["task-folder"]["configured"] is False
    last = status["components"]["worker"]["poll"]["last_cycle"]
    assert last["unconfigured"] == 1 and last["errors"] == 0
