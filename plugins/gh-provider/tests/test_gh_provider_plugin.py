"""The plugin as the host loads it: configuration, and availability when gh is missing."""

from __future__ import annotations

import json

import hostcore_gh.plugin as gh_plugin

CONFIG = {"plugins": {"gh": {"repos": ["o/r"], "labels": ["agent"]}}}


def test_the_plugin_registers_the_gh_provider_from_config(make_host, fake_gh):
    host = make_host(gh_plugin, config=CONFIG, env=fake_gh.env)
    (provider,) = host.providers
    assert provider.name == "gh" and provider.scopes == ["o/r"] and provider.labels == ["agent"]
    assert host.status()["components"]["provider"]["gh"]["available"] is True


def test_without_gh_the_provider_is_unavailable_and_the_host_keeps_running(make_host, tmp_path):
    host = make_host(gh_plugin, config=CONFIG, env={"PATH": str(tmp_path)})
    entry = host.status()["components"]["provider"]["gh"]
    assert entry["available"] is False and "not installed" in entry["reason"]
    (info,) = [i for i in host.plugin_infos() if i.name == gh_plugin.__name__]
    assert info.registrations[0].available is False
    report = host.tick()
    assert report.ok
    assert host.poller.last_cycle()[0].available is False


def test_cli_shows_the_provider_unavailable(hostcore_cli, register_plugin, tmp_path):
    register_plugin(gh_plugin)
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["o/r"]\n')
    env = {"PATH": str(tmp_path / "empty")}
    plugins = hostcore_cli("plugins", "--json", env=env, root=root)
    assert plugins.exit_code == 0
    regs = [r for info in json.loads(plugins.stdout) for r in info["registrations"]
            if r["kind"] == "provider"]
    assert regs == [{"kind": "provider", "name": "gh", "available": False,
                     "reason": regs[0]["reason"]}]
    assert "not installed" in regs[0]["reason"]
    status = hostcore_cli("status", env=env, root=root)
    assert status.exit_code == 0 and "not installed" in status.stdout
    poll = hostcore_cli("poll", "--once", env=env, root=root)
    assert poll.exit_code == 1 and "unavailable" in poll.stderr


def test_a_bad_repo_in_config_is_a_config_error_naming_it(hostcore_cli, register_plugin,
                                                          tmp_path):
    register_plugin(gh_plugin)
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text('[plugins.gh]\nrepos = ["not-a-repo"]\n')
    result = hostcore_cli("status", root=root)
    assert result.exit_code == 2
    assert "[plugins.gh] repos[0]" in result.stderr
