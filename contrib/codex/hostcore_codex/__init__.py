"""hostcore-codex: Codex CLI session rollouts as hostcore evidence.

The plugin (the entry point) is :mod:`hostcore_codex.plugin`; how a rollout
line becomes an evidence row is in :mod:`hostcore_codex.source`.
"""
