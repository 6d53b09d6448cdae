"""The distribution is installed and discoverable the way hostcore finds plugins."""

from __future__ import annotations

import hostcore_github_capture.plugin as capture_plugin
import importlib_metadata


def test_distribution_entry_point_resolves_to_the_plugin_module():
    (ep,) = importlib_metadata.entry_points(group="hostcore", name="github-capture")
    assert ep.dist.name == "hostcore-github-capture"
    assert "hostcore-gh" in " ".join(ep.dist.requires or ())
    assert ep.load() is capture_plugin
