"""Typed configuration: defaults without a file, and plugin tables decoded by their own Struct."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from hostcore import hookimpl
from hostcore.config import load_config
from hostcore.errors import ConfigError


class Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    per_tick: Annotated[int, msgspec.Meta(gt=0)] = 10


class DemoConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    mode: Literal["fast", "careful"] = "careful"
    limits: Limits = msgspec.field(default_factory=Limits)


def test_no_file_means_working_defaults(tmp_path):
    config = load_config(None, tmp_path)
    assert config.source is None
    assert config.settings.run.interval_seconds == 60
    assert config.plugin("demo", DemoConfig) == DemoConfig()


def test_plugin_table_is_decoded_with_the_plugins_struct(tmp_path):
    (tmp_path / "hostcore.toml").write_text(
        "[plugins.demo]\nmode = 'fast'\n\n[plugins.demo.limits]\nper_tick = 3\n")
    config = load_config(None, tmp_path)
    assert config.plugin("demo", DemoConfig) == DemoConfig(mode="fast",
                                                           limits=Limits(per_tick=3))


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[plugins.demo]\nmood = 'fast'\n", "unknown key `mood`"),
        ("[plugins.demo]\nmode = 'reckless'\n", "bad value for `mode`"),
        ("[plugins.demo.limits]\nper_tick = 0\n", "bad value for `limits.per_tick`"),
        ("[plugins.demo.limits]\nper_tik = 1\n", "unknown key `limits.per_tik`"),
    ],
)
def test_plugin_table_errors_name_the_file_table_and_key(tmp_path, toml, named):
    path = tmp_path / "hostcore.toml"
    path.write_text(toml)
    config = load_config(None, tmp_path)  # the host's own keys are fine
    with pytest.raises(ConfigError) as excinfo:
        config.plugin("demo", DemoConfig)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: [plugins.demo]: ")
    assert named in message


def test_a_plugin_table_that_is_not_a_table_is_reported(tmp_path):
    (tmp_path / "hostcore.toml").write_text("[plugins]\ndemo = 3\n")
    with pytest.raises(ConfigError, match=r"plugins\.demo"):
        load_config(None, tmp_path)


def test_a_plugin_reading_a_bad_table_makes_the_cli_exit_2(hostcore_cli, register_plugin,
                                                          tmp_path):
    class Demo:
        __name__ = "demo"

        @hookimpl
        def hostcore_workers(self, host):
            host.plugin_config("demo", DemoConfig)

    register_plugin(Demo())
    root = tmp_path / "root"
    root.mkdir()
    (root / "hostcore.toml").write_text("[plugins.demo]\nmode = 'reckless'\n")
    result = hostcore_cli("run", "--once", root=root)
    assert result.exit_code == 2
    assert "[plugins.demo]" in result.stderr and "`mode`" in result.stderr


def test_config_given_as_a_mapping_is_validated_too(make_host):
    with pytest.raises(ConfigError, match=r"run\.interval_seconds"):
        make_host(config={"run": {"interval_seconds": 0}})
