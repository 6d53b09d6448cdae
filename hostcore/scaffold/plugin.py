"""Built-in: ``hostcore new-plugin``, which writes a ready-to-install plugin package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # Command code loads only when a plugin command is looked up (RootGroup, cli/app.py).
    from hostcore.scaffold.commands import new_plugin

    cli.add_command(new_plugin)
