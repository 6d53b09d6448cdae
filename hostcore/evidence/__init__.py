"""Evidence: the store, the export seam, the withholding policy and its inputs.

* :mod:`~hostcore.evidence.rows` — the values sources hand the store;
* :mod:`~hostcore.evidence.schema` — the store's tables and the reads the seam runs;
* :mod:`~hostcore.evidence.store` — the SQLite store (append, purge, partitions);
* :mod:`~hostcore.evidence.seam` — the one way rows leave, under the live policy;
* :mod:`~hostcore.evidence.policy`, :mod:`~hostcore.evidence.inputs` — the policy
  and its three built-in inputs; :mod:`~hostcore.evidence.paths` — how paths compare;
* :mod:`~hostcore.evidence.transcripts` — helpers for JSON Lines transcript sources;
* :mod:`~hostcore.evidence.plugin`, :mod:`~hostcore.evidence.commands` — the
  built-in plugin (ingest worker, inputs, events) and its commands.

Imports follow the table in ``docs/architecture.md`` (checked by
``tests/test_import_rules.py``): nothing here imports the work items, the rest of
:mod:`hostcore.export` (only its hash definitions, :mod:`hostcore.export.ref`), the
tick loop or the CLI application, not even inside a function; only
:mod:`~hostcore.evidence.commands` sits on the host, and only
:mod:`~hostcore.evidence.plugin` imports it, inside its ``hostcore_commands`` hook.
The host and the tick loop import this package only inside functions
(``host.store``, ``host.policy``, ``host.seam``).
"""
