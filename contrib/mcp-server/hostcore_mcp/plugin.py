"""The ``mcp`` plugin: adds ``hostcore mcp``, an MCP server over the state root.

It registers nothing a tick runs: the server is a command, started by an agent
(or its configuration) and answering from local state until its client leaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # Loaded only when a plugin command is looked up (RootGroup): the command module
    # stays out of building a host.
    from hostcore_mcp.commands import mcp_command

    cli.add_command(mcp_command)
