"""Evidence: the store, the export seam, the withholding policy and its inputs.

* :mod:`~hostcore.evidence.rows` — the values sources hand the store;
* :mod:`~hostcore.evidence.schema` — the store's tables and every SQL over them;
* :mod:`~hostcore.evidence.store` — the SQLite store (append, purge, partitions);
* :mod:`~hostcore.evidence.seam` — the one way rows leave, under the live policy;
* :mod:`~hostcore.evidence.policy`, :mod:`~hostcore.evidence.inputs` — the policy
  and its three built-in inputs; :mod:`~hostcore.evidence.paths` — how paths compare;
* :mod:`~hostcore.evidence.transcripts` — helpers for JSON Lines transcript sources;
* :mod:`~hostcore.evidence.plugin`, :mod:`~hostcore.evidence.commands` — the
  built-in plugin (ingest worker, inputs, events) and its commands.

May import: :mod:`hostcore.errors`, :mod:`hostcore.files`, :mod:`hostcore.records`,
:mod:`hostcore.timestamps`, :mod:`hostcore.export.ref` (the hash definitions), and
:mod:`hostcore.plugin` for its built-in plugin. Nothing here imports the CLI
application, the work items or the exporter.
"""
