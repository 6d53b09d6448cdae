"""Scaffolding: ``hostcore new-plugin`` writes a ready-to-install plugin package.

* :mod:`~hostcore.scaffold.create` — :func:`~hostcore.scaffold.create.create_plugin`
  and the per-kind template table;
* ``templates/`` — the files it fills (``common/`` for every kind, one folder per kind);
* :mod:`~hostcore.scaffold.plugin` — the built-in plugin adding the command.

Imports. :mod:`~hostcore.scaffold.create` and :mod:`~hostcore.scaffold.plugin`, at
module level and inside functions alike, import only the foundation modules
(:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`, :mod:`~hostcore.config`,
:mod:`~hostcore.files`, :mod:`~hostcore.records`, :mod:`~hostcore.telemetry`),
:mod:`hostcore.plugin` (not :mod:`hostcore.plugin.cli`), this package and the root
package (the version a new plugin requires). :mod:`~hostcore.scaffold.commands` sits on
the host: it may also import :mod:`hostcore.host` and :mod:`hostcore.plugin.cli`, and
only :mod:`~hostcore.scaffold.plugin` imports it, inside its ``hostcore_commands`` hook.
No other domain package is imported here.
"""
