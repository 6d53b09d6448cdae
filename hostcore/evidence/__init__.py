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

Imports. Every module here but :mod:`~hostcore.evidence.commands` (the engine and the
built-in plugin), at module level and inside functions alike, imports only the
foundation modules (:mod:`hostcore.errors`, :mod:`~hostcore.timestamps`,
:mod:`~hostcore.config`, :mod:`~hostcore.files`, :mod:`~hostcore.records`,
:mod:`~hostcore.telemetry`), :mod:`hostcore.plugin` (not :mod:`hostcore.plugin.cli`),
this package and :mod:`hostcore.export.ref` (the hash definitions: the one module of
another domain it imports); :mod:`hostcore.host` only under ``TYPE_CHECKING``.
:mod:`~hostcore.evidence.commands` sits on the host: it may also import
:mod:`hostcore.host` and :mod:`hostcore.plugin.cli`, and only
:mod:`~hostcore.evidence.plugin` imports it, inside its ``hostcore_commands`` hook.
Nothing here imports the work items, the rest of :mod:`hostcore.export`, the tick loop
or the CLI application, not even inside a function. The host and the tick loop import
this package only inside functions (``host.store``, ``host.policy``, ``host.seam``).
"""
