"""The ``hostcore`` application: the root command group and the host's own commands.

* :mod:`~hostcore.cli.app` — :func:`~hostcore.cli.app.build_cli` and
  :func:`~hostcore.cli.app.run_cli` (exit statuses, one-line errors);
* :mod:`~hostcore.cli.commands` — ``plugins``, ``run``, ``status``, ``config``;
* :mod:`~hostcore.cli.lean` — ``run --once`` and ``status --json`` without click, through
  the same code (:mod:`~hostcore.cli.running`, :mod:`~hostcore.cli.failures`), and
  :mod:`~hostcore.cli.hook`, an agent's event; both read their options with
  :mod:`~hostcore.cli.argv`.

This is the application only. What a plugin's own commands need (``pass_host``,
``json_option``, ``emit_json``, ``print_table``, ``stop_on_signals``) lives in
:mod:`hostcore.plugin.cli`; importing it from here still works in 0.2, with a
deprecation warning.

Imports. At module level and inside functions alike it imports only the foundation
modules (:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`, :mod:`~hostcore.config`,
:mod:`~hostcore.files`, :mod:`~hostcore.records`, :mod:`~hostcore.telemetry`),
:mod:`hostcore.plugin` (:mod:`hostcore.plugin.cli` included), :mod:`hostcore.host`,
:mod:`hostcore.tick` and this package: never a domain package (evidence, export,
workitems, scaffold), whose commands arrive through ``hostcore_commands`` or, for a
built-in, by the name its plugin module declares (``DECLARED_COMMANDS``, imported by
that name when the command is looked up: see :class:`~hostcore.cli.app.RootGroup`). Nothing
imports it but :mod:`hostcore.__main__` and :mod:`hostcore.testing`, each inside a
function; this ``__init__`` imports nothing at module level.
"""

from __future__ import annotations

import importlib
import warnings

# Not typing's: `hostcore hook` imports this package (mypy reads the constant as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MOVED = frozenset(("pass_host", "json_option", "emit_json", "print_table", "stop_on_signals",
                    "HostFactory"))


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(f"hostcore.cli.{name} moved to hostcore.plugin.cli.{name}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("hostcore.plugin.cli"), name)
    if name in ("run_cli", "build_cli"):
        return getattr(importlib.import_module("hostcore.cli.app"), name)
    raise AttributeError(f"module 'hostcore.cli' has no attribute {name!r}")
