"""The ``hostcore new-plugin`` command.

A module-level click command; the built-in plugin in
:mod:`hostcore.scaffold.plugin` adds it to the CLI.
"""

from __future__ import annotations

from pathlib import Path

import click

from hostcore.plugin.cli import emit_json, json_option
from hostcore.scaffold.create import (
    KINDS,
    LEGACY_KINDS,
    ScaffoldError,
    check_name,
    create_plugin,
)


def _kind(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A kind as spelt by the hooks and `plugins --json`; 0.1's spellings still work."""
    if value in LEGACY_KINDS:
        click.echo(f"hostcore: --kind {value} is now spelt {LEGACY_KINDS[value]}", err=True)
        return LEGACY_KINDS[value]
    if value not in KINDS:
        raise click.BadParameter(f"{value!r} is not one of {', '.join(KINDS)}")
    return value


@click.command("new-plugin")
@click.argument("name")
@click.option("--kind", default="worker", show_default=True, callback=_kind,
              metavar="[" + "|".join(KINDS) + "]",
              help="What the plugin registers: an evidence source, a work-item provider, a "
                   "withholding-policy input, a telemetry sink, an export destination or a "
                   "worker (spelt as in `hostcore plugins --json`); or a command, which "
                   "adds `hostcore NAME`.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write the package into (default: ./hostcore-NAME). It must "
                   "not exist or be empty.")
@json_option
def new_plugin(name: str, kind: str, directory: Path | None, as_json: bool) -> None:
    """Write a new plugin package NAME, ready for `pip install -e 'DIR[test]'`.

    The package has a pyproject.toml with the `hostcore` entry point, a small
    working plugin of the chosen kind, a README, and tests that run hostcore's
    conformance suite for that kind. It passes them as soon as it is installed
    with its test extra.

    Keys of --json: path, name, kind, distribution, package, files.
    """
    try:
        target, files = create_plugin(name, kind, directory)
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        names = check_name(name)
        emit_json({"path": str(target), "name": name, "kind": kind,
                   "distribution": names.dist, "package": names.package,
                   "files": [str(f) for f in files]})
        return
    click.echo(f"Wrote {kind} plugin {name!r} to {target}:")
    for file in files:
        click.echo(f"  {file}")
    click.echo("\nNext:\n"
               f"  pip install -e '{target}[test]'\n"
               f"  python -m pytest {target}\n"
               "  hostcore plugins")
