"""Built-in: ``hostcore new-plugin``, which writes a ready-to-install plugin package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostcore.plugin.declared import add_declared
from hostcore.plugin.markers import hookimpl

if TYPE_CHECKING:
    import click


# The commands this plugin adds: name -> ("module:attribute", one-line help).
# hostcore's command line lists them from here and imports a command's module only
# when that command runs (RootGroup, cli/app.py); the hook below gives any other
# group (an embedder's, the conformance kit's) the commands themselves.
DECLARED_COMMANDS = {
    "new-plugin": ("hostcore.scaffold.commands:new_plugin",
                   "Write a new plugin package NAME, ready for `pip install -e 'DIR[test]'`."),
}


@hookimpl
def hostcore_commands(cli: click.Group) -> None:
    # The command modules load now, when a group asks for them: the host builds this
    # plugin on every start, and commands seldom run.
    add_declared(cli, DECLARED_COMMANDS)
