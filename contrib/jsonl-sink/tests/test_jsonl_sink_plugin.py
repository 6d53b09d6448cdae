"""The jsonl-sink plugin inside a host: registration, config table, entry point."""

from __future__ import annotations

import json

import hostcore_jsonl_sink.plugin as jsonl_plugin
import importlib_metadata
import pytest
from hostcore_jsonl_sink.sink import FILE_NAME, KEEP, MAX_BYTES

from hostcore.errors import ConfigError


def test_host_events_land_in_the_state_folder(make_host):
    host = make_host(jsonl_plugin)
    host.tick()
    path = host.root / "plugins" / "jsonl-sink" / FILE_NAME
    names = [json.loads(line)["name"] for line in path.read_text().splitlines()]
    assert names[0] == "plugins.loaded"
    assert names[-1] == "tick.completed"


def test_defaults_apply_without_a_plugin_table(make_host):
    sinks = make_host(jsonl_plugin).registered("telemetry_sink")
    (sink,) = [s for s in sinks if s.name == "jsonl"]
    assert (sink.max_bytes, sink.keep) == (MAX_BYTES, KEEP)


def test_plugin_table_sets_rotation(make_host):
    host = make_host(jsonl_plugin, config={"plugins": {"jsonl-sink": {"max_bytes": 300,
                                                                      "keep": 1}}})
    for _ in range(20):
        host.tick()
    sink_dir = host.root / "plugins" / "jsonl-sink"
    assert sorted(p.name for p in sink_dir.glob(f"{FILE_NAME}*")) == [FILE_NAME, f"{FILE_NAME}.1"]
    assert host.status()["components"]["telemetry_sink"]["jsonl"]["files"] == 2


@pytest.mark.parametrize(
    ("table", "named"),
    [({"max_byte": 10}, "max_byte"), ({"keep": -1}, "keep"), ({"max_bytes": "big"}, "max_bytes"),
     ({"keep": 1_000_000}, "keep")],
)
def test_bad_plugin_table_is_a_config_error_naming_the_key(make_host, table, named):
    with pytest.raises(ConfigError) as excinfo:
        make_host(jsonl_plugin, config={"plugins": {"jsonl-sink": table}})
    assert "[plugins.jsonl-sink]" in str(excinfo.value)
    assert f"`{named}`" in str(excinfo.value)


def test_cli_exits_2_on_a_bad_plugin_table(hostcore_cli, register_plugin, tmp_path):
    register_plugin(jsonl_plugin)
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text("[plugins.jsonl-sink]\nkeeep = 2\n")
    result = hostcore_cli("run", "--once", root=root)
    assert result.exit_code == 2
    assert "keeep" in result.stderr


def test_distribution_entry_point_resolves_to_the_plugin_module():
    (ep,) = importlib_metadata.entry_points(group="hostcore", name="jsonl-sink")
    assert ep.dist.name == "hostcore-jsonl-sink"
    assert ep.load() is jsonl_plugin
