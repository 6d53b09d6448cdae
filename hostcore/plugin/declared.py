"""A built-in's commands, declared by name: listed without importing their code.

A built-in plugin module holds ``DECLARED_COMMANDS``: each command's name ->
``("module:attribute", one-line help)``. hostcore's own command line lists the
commands from there and imports a command's module only when that command runs
(:class:`hostcore.cli.app.RootGroup`); the plugin's ``hostcore_commands`` hook gives
any other group (an embedder's, the conformance kit's) the same commands through
:func:`add_declared`. One declaration, so the two never disagree.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click

# name -> ("module:attribute" of the click command, its one-line help)
Declared = Mapping[str, tuple[str, str]]

__all__ = ["Declared", "add_declared", "load_declared"]


def load_declared(target: str) -> click.Command:
    """The click command ``target`` (``"module:attribute"``) names, its module
    imported now. A built-in's own module: one that fails to import is hostcore's
    bug, raised."""
    module_name, _, attribute = target.partition(":")
    command: click.Command = getattr(importlib.import_module(module_name), attribute)
    return command


def add_declared(cli: click.Group, declared: Declared) -> None:
    """Add every command of ``declared`` to ``cli``, under its declared name."""
    for name, (target, _) in declared.items():
        cli.add_command(load_declared(target), name)
