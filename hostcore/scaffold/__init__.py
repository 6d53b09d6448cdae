"""Scaffolding: ``hostcore new-plugin`` writes a ready-to-install plugin package.

* :mod:`~hostcore.scaffold.create` — :func:`~hostcore.scaffold.create.create_plugin`
  and the per-kind template table;
* ``templates/`` — the files it fills (``common/`` for every kind, one folder per kind);
* :mod:`~hostcore.scaffold.plugin` — the built-in plugin adding the command.

May import :mod:`hostcore.errors`, :mod:`hostcore.plugin` and the kind table of
:mod:`hostcore.plugin.registration`.
"""
