"""hostcore-claude-code: Claude Code session transcripts as hostcore evidence.

The plugin (the entry point) is :mod:`hostcore_claude_code.plugin`; how a
transcript line becomes an evidence row is in :mod:`hostcore_claude_code.source`.
"""
