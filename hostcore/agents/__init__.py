"""Agent hooks: Claude Code and Codex drive hostcore through their own hook systems.

* :mod:`~hostcore.agents.events` — :class:`~hostcore.agents.events.AgentEvent`, the
  typed event a hook's stdin becomes, and how it is decoded;
* :mod:`~hostcore.agents.dispatch` — whether any plugin is due for an event, decided
  with the standard library alone before anything heavy loads;
* :mod:`~hostcore.agents.hook` — what ``hostcore hook`` does with one event: the lean
  plugin set it loads, the ``hostcore_agent_event`` calls, the faults it keeps;
* :mod:`~hostcore.agents.index` — which plugins implement the agent hooks and what
  each declared, cached under the root so a hook imports no other plugin;
* :mod:`~hostcore.agents.faults` — the hook faults kept under the root (counts, no names);
* :mod:`~hostcore.agents.install` — each agent's settings file, edited in place;
* :mod:`~hostcore.agents.plugin` — the built-in: the ``agent-hooks`` worker and commands;
* :mod:`~hostcore.agents.commands` — ``hostcore hook`` and ``hostcore hooks``.

Imports. A domain package like evidence or export: at module level it imports only
the foundation modules, :mod:`hostcore.plugin` and itself; its commands module only
inside the plugin's ``hostcore_commands``. The one module outside the package that
imports it is :mod:`hostcore.cli.hook` (the hook's lean path, which must not build the
click application); this ``__init__`` imports nothing.
"""
