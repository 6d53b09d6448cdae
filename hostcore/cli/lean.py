"""``run --once`` and ``status --json`` without the click application.

cron runs ``hostcore run --once`` every few minutes and scripts poll ``hostcore
status --json``: their start is most of what they cost (``benchmarks/startup.py``),
and click with what it imports is a seventh of it. :mod:`hostcore.__main__` hands
this module the command lines of exactly these forms
(:func:`hostcore.cli.argv.lean_command`)::

    [--root R] [--config C] run --once [--json]
    [--root R] [--config C] status --json

:func:`main` runs them as the full command line does, through the same code: the
same plugins loaded, the same ticks and lines (:mod:`hostcore.cli.running`), the
same JSON (:func:`hostcore.plugin.output.json_text`), the same failures and exit
statuses (:mod:`hostcore.cli.failures`). Any other form, or an option of the
terminal's (``-q``, ``-v``, ``--color``), goes through click.

Imported only once msgspec is (:mod:`hostcore.msgspec_import`).
"""

from __future__ import annotations

import gc
import logging
import os

from hostcore.cli.argv import LOG_FORMAT, LeanCommand
from hostcore.cli.failures import exit_status
from hostcore.cli.running import run_ticks
from hostcore.host import Host
from hostcore.plugin.loader import BUILTIN_PLUGINS, PluginSet, load_plugins
from hostcore.plugin.output import echo, json_text
from hostcore.steps import StdoutGuard


def main(command: LeanCommand) -> int:
    """Run ``command`` as the click application would; returns the exit status.

    As :func:`hostcore.cli.app.run_cli` with ``freeze_loaded``, the cyclic collector
    is off (the caller turned it off) until the plugins are loaded, and what was
    made until then is frozen out of its reach.
    """
    env = dict(os.environ)
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    try:
        with StdoutGuard():  # what plugins print as they are imported goes to stderr
            plugin_set = load_plugins(BUILTIN_PLUGINS, (), load_entrypoints=True, env=env)
        gc.freeze()
        gc.enable()
        try:
            _run(command, plugin_set, env)
        except KeyboardInterrupt:
            echo("Aborted.", err=True)  # as click says it
            return 1
    except (Exception, SystemExit) as exc:
        status = exit_status(exc, echo)
        if status is None:
            raise  # a bug: its traceback, as under click
        return status
    return 0


def _run(command: LeanCommand, plugin_set: PluginSet, env: dict[str, str]) -> None:
    host: Host | None = None
    try:
        if command.name == "status":
            # Plugin code (registration, status hooks) prints to stderr: stdout is the JSON.
            with StdoutGuard():
                host = Host(root=command.root, config=command.config, env=env,
                            plugin_set=plugin_set, read_only=True)
                report = host.status()
            echo(json_text(report, indent=2))
            return
        # What plugins print goes to stderr, from the host's build on: stdout carries
        # the reports alone (as hostcore.cli.commands.run_command).
        with StdoutGuard() as guard:
            host = Host(root=command.root, config=command.config, env=env,
                        plugin_set=plugin_set)
            run_ticks(host, once=True, as_json=command.as_json, guard=guard, quiet=False,
                      echo=echo)
    finally:
        if host is not None:
            host.close()
