"""``[plugins.file-custody]``: the plugin's config, and the registry folder it names.

Apart from the worker so that the hook's lean handler (:mod:`.agent_hook`), which has
no host, resolves the registry exactly as the host-side code does.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

PLUGIN_NAME = "file-custody"
DEFAULT_REGISTRY = Path("plugins") / PLUGIN_NAME / "registry"


class CustodyConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.file-custody]``: where the heartbeat registry lives."""

    directory: str | None = None


def registry_folder(root: Path, config: CustodyConfig) -> Path:
    """The registry folder ``config`` names for the state folder ``root`` (relative
    paths are under it; not created)."""
    if config.directory is None:
        return root / DEFAULT_REGISTRY
    path = Path(config.directory).expanduser()
    return path if path.is_absolute() else root / path
