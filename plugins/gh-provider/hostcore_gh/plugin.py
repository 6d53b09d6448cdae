"""The hostcore entry point of hostcore-gh: registers the ``gh`` provider.

Configure it in ``hostcore.toml``::

    [plugins.gh]
    repos = ["owner/repo"]
    labels = ["agent"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl
from hostcore_gh.provider import GhConfig, GhProvider, check_config
from hostcore_gh.runner import GhRunner

if TYPE_CHECKING:
    from hostcore.host import Host


@hookimpl
def hostcore_providers(host: Host) -> GhProvider:
    config = check_config(host.plugin_config("gh", GhConfig), host.config.origin)
    # The folder is created by the first write into it (a rate-limit wait), not here:
    # building a host creates nothing a poll does not need.
    return GhProvider(config, GhRunner(env=host.env), state_dir=host.root / "plugins" / "gh")
