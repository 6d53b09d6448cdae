"""The host's own loader: report and skip broken plugins, honour allow/block lists."""

from __future__ import annotations

import sys

import pytest

from hostcore import Host, hookimpl
from hostcore.errors import PluginLoadError
from hostcore.plugin.registration import WorkerResult


def build(tmp_path, env, plugins=()):
    return Host(root=tmp_path / "root", plugins=list(plugins), load_entrypoints=True, env=env)


@pytest.fixture
def site(fake_site, plugin_sources):
    """Three distributions: fake-good, fake-broken (raises at import), fake-other."""
    modules = {}
    modules.update(fake_site.add("fake-good", {"good": plugin_sources("good")}, version="1.2"))
    modules.update(fake_site.add("fake-broken", {"broken": plugin_sources("broken")}))
    modules.update(fake_site.add("fake-other", {"other": "VALUE = 1\n"}))
    return modules


ALL_FAKES = {"HOSTCORE_LOAD_PLUGINS": "fake-good,fake-broken,fake-other"}


def test_good_plugin_is_loaded_with_its_distribution_version_and_hooks(tmp_path, site):
    host = build(tmp_path, ALL_FAKES)
    info = host.plugins.infos["good"]
    assert (info.status, info.distribution, info.version) == ("loaded", "fake-good", "1.2")
    assert info.hooks == ["hostcore_workers"]
    assert [(r.kind, r.name) for r in info.registrations] == [("worker", "hello")]
    assert "hello" in [s.name for s in host.tick().steps]


def test_plugin_raising_at_import_is_reported_and_skipped(tmp_path, site):
    host = build(tmp_path, ALL_FAKES)
    info = host.plugins.infos["broken"]
    assert info.status == "failed"
    assert info.distribution == "fake-broken"
    assert info.error == "RuntimeError: the broken plugin cannot start"
    assert "raise RuntimeError" in info.traceback
    assert host.tick().ok  # the host keeps working without it


def test_a_plugin_without_hooks_loads_and_registers_nothing(tmp_path, site):
    info = build(tmp_path, ALL_FAKES).plugins.infos["other"]
    assert (info.status, info.hooks, info.registrations) == ("loaded", [], [])


def test_empty_allow_list_loads_no_external_plugin(tmp_path, site):
    host = build(tmp_path, {"HOSTCORE_LOAD_PLUGINS": ""})
    external = [i for i in host.plugins.infos.values() if i.status != "builtin"]
    assert external, "installed plugins are still listed"
    assert {i.status for i in external} == {"blocked"}
    assert not set(site.values()) & set(sys.modules)
    assert "tick.completed" in host.catalog  # built-ins always load


def test_allow_list_names_distributions_in_any_spelling(tmp_path, site):
    host = build(tmp_path, {"HOSTCORE_LOAD_PLUGINS": " Fake_Good , fake.other"})
    statuses = {n: host.plugins.infos[n].status for n in ("good", "broken", "other")}
    assert statuses == {"good": "loaded", "broken": "blocked", "other": "loaded"}


def test_block_list_blocks_one_distribution_without_importing_it(tmp_path, site):
    host = build(tmp_path, {**ALL_FAKES, "HOSTCORE_DISABLE_PLUGINS": "fake-broken"})
    assert host.plugins.infos["broken"].status == "blocked"
    assert host.plugins.infos["good"].status == "loaded"
    assert site["broken"] not in sys.modules


def test_builtins_cannot_be_disabled(tmp_path, site):
    host = build(tmp_path, {"HOSTCORE_DISABLE_PLUGINS": "hostcore", "HOSTCORE_LOAD_PLUGINS": ""})
    assert host.plugins.infos["hostcore.plugin.core"].status == "builtin"
    assert "plugins.loaded" in host.catalog


def test_strict_mode_turns_a_broken_plugin_into_an_error_naming_it(tmp_path, site):
    with pytest.raises(PluginLoadError) as excinfo:
        build(tmp_path, {**ALL_FAKES, "HOSTCORE_STRICT_PLUGINS": "1"})
    message = str(excinfo.value)
    assert "'broken'" in message
    assert "fake-broken 1.0" in message
    assert "the broken plugin cannot start" in message


def test_two_distributions_claiming_one_plugin_name_fail_the_second_naming_both(
    tmp_path, fake_site, plugin_sources
):
    fake_site.add("fake-first", {"same": plugin_sources("good")})
    fake_site.add("fake-second", {"same": plugin_sources("good")})
    host = build(tmp_path, {"HOSTCORE_LOAD_PLUGINS": "fake-first,fake-second"})
    infos = [i for i in host.plugins.infos.values() if i.name == "same"]
    # Whichever entry point comes first keeps the name; the other fails alone.
    assert sorted(i.status for i in infos) == ["failed", "loaded"]
    assert {i.distribution for i in infos} == {"fake-first", "fake-second"}
    (failed,) = [i for i in infos if i.status == "failed"]
    assert "fake-first" in failed.error and "fake-second" in failed.error
    assert [w.name for w in host.workers].count("hello") == 1
    assert host.tick().ok


class UnknownHook:
    __name__ = "unknown-hook"

    @hookimpl
    def hostcore_sourcez(self, host):
        return None


class WrongArguments:
    __name__ = "wrong-arguments"

    @hookimpl
    def hostcore_workers(self, hots):
        return None


class UnknownSpecname:
    __name__ = "unknown-specname"

    @hookimpl(specname="hostcore_nothing_like_this")
    def workers(self, host):
        return None


@pytest.mark.parametrize(
    ("plugin", "named"),
    [
        (UnknownHook(), ["hostcore_sourcez"]),
        (WrongArguments(), ["hostcore_workers", "hots"]),
        (UnknownSpecname(), ["hostcore_nothing_like_this"]),
    ],
)
def test_hook_validation_errors_are_reported_by_name(tmp_path, plugin, named):
    host = Host(root=tmp_path, plugins=[plugin], load_entrypoints=False, env={})
    info = host.plugins.infos[plugin.__name__]
    assert info.status == "failed"
    for word in named:
        assert word in info.error
    assert host.plugins.plugin_object(plugin.__name__) is None
    assert host.tick().ok


def test_hook_validation_error_is_fatal_in_strict_mode(tmp_path):
    with pytest.raises(PluginLoadError, match="hostcore_sourcez"):
        Host(root=tmp_path, plugins=[UnknownHook()], load_entrypoints=False,
             env={"HOSTCORE_STRICT_PLUGINS": "1"})


class Named:
    """A plugin registering one worker of a given name."""

    def __init__(self, plugin_name: str, worker_name: str) -> None:
        self.__name__ = plugin_name

        class Worker:
            name = worker_name

            def run(self, host):
                return WorkerResult()

        self.worker = Worker()

    @hookimpl
    def hostcore_workers(self):
        return self.worker


def test_duplicate_registration_names_are_rejected_naming_both_plugins(tmp_path):
    first, second = Named("first", "same"), Named("second", "same")
    host = Host(root=tmp_path, plugins=[first, second], load_entrypoints=False, env={})
    assert [w for w in host.workers if w.name == "same"] == [first.worker]
    info = host.plugins.infos["second"]
    assert info.status == "failed"
    assert "'same'" in info.error
    assert "'first'" in info.error and "'second'" in info.error


def test_same_name_in_different_kinds_is_allowed(tmp_path):
    class Sink:
        name = "same"

        def receive(self, event):
            pass

    class SinkPlugin:
        __name__ = "sink-plugin"

        @hookimpl
        def hostcore_telemetry_sinks(self):
            return Sink()

    host = Host(root=tmp_path, plugins=[Named("w", "same"), SinkPlugin()],
                load_entrypoints=False, env={})
    assert {i.status for i in host.plugins.infos.values()} == {"builtin", "loaded"}


class HalfBroken:
    """Registers a good worker, then returns a source without ``read``."""

    __name__ = "half-broken"

    @hookimpl
    def hostcore_sources(self):
        class NoRead:
            name = "no-read"

        return NoRead()

    @hookimpl
    def hostcore_workers(self):
        return Named("unused", "half-worker").worker


def test_each_kind_is_reachable_by_property_and_an_unknown_kind_is_named(tmp_path):
    host = Host(root=tmp_path, plugins=[Named("w", "mine")], load_entrypoints=False, env={})
    assert host.telemetry_sinks == host.registered("telemetry_sink")
    assert host.workers == host.registered("worker")
    assert "mine" in [w.name for w in host.registered("worker")]
    with pytest.raises(KeyError, match="'workers' is not a registration kind"):
        host.registered("workers")


def test_invalid_registration_fails_the_whole_plugin_naming_it(tmp_path):
    host = Host(root=tmp_path, plugins=[HalfBroken()], load_entrypoints=False, env={})
    info = host.plugins.infos["half-broken"]
    assert info.status == "failed"
    assert "half-broken" in info.error and "read" in info.error
    assert "half-worker" not in [w.name for w in host.workers]
    assert "no-read" not in [s.name for s in host.sources]


def test_registration_hook_that_raises_fails_only_its_plugin(tmp_path):
    class Raises:
        __name__ = "raises"

        @hookimpl
        def hostcore_workers(self):
            raise KeyError("boom")

    good = Named("good", "fine")
    host = Host(root=tmp_path, plugins=[Raises(), good], load_entrypoints=False, env={})
    assert host.plugins.infos["raises"].status == "failed"
    assert "KeyError" in host.plugins.infos["raises"].error
    assert good.worker in host.workers


def test_allow_and_block_lists_take_entry_point_names_too(tmp_path, site):
    host = build(tmp_path, {"HOSTCORE_LOAD_PLUGINS": "good,other",
                            "HOSTCORE_DISABLE_PLUGINS": "OTHER"})
    statuses = {n: host.plugins.infos[n].status for n in ("good", "broken", "other")}
    assert statuses == {"good": "loaded", "broken": "blocked", "other": "blocked"}


def test_a_listed_name_that_matches_no_plugin_is_named_in_a_warning(tmp_path, site, caplog):
    caplog.set_level("WARNING", logger="hostcore.plugin.loader")
    build(tmp_path, {"HOSTCORE_LOAD_PLUGINS": "good,claude-kode",
                     "HOSTCORE_DISABLE_PLUGINS": "ghh"})
    warned = [r.getMessage() for r in caplog.records]
    assert any("HOSTCORE_LOAD_PLUGINS" in w and "'claude-kode'" in w for w in warned)
    assert any("HOSTCORE_DISABLE_PLUGINS" in w and "'ghh'" in w for w in warned)
    assert not any("'good'" in w for w in warned)


def test_a_config_table_no_plugin_reads_is_named_in_a_warning(tmp_path, site, caplog):
    caplog.set_level("WARNING", logger="hostcore.host")
    config = {"plugins": {"gooood": {"x": 1}, "good": {"x": 1}, "fake-other": {},
                          "export": {"destination": "outbox"}}}
    Host(root=tmp_path / "root", load_entrypoints=True, env=ALL_FAKES, config=config)
    warned = [r.getMessage() for r in caplog.records if "config table" in r.getMessage()]
    assert warned == ["config table [plugins.gooood] is read by no installed plugin; its "
                      "settings have no effect"]
