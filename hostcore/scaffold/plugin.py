"""Built-in: ``hostcore new-plugin``, which writes a ready-to-install plugin package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    from hostcore.scaffold.commands import new_plugin

    cli.add_command(new_plugin)
