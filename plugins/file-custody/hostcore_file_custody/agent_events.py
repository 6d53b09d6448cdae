"""Which agent hook events custody acts on, and how often a refresh writes.

Kept apart, importing nothing, so that the plugin's entry module (every host build),
the hook's declaration and the lean handler all read them without importing the
telemetry catalogue (:mod:`.events`) or the protocol.
"""

from __future__ import annotations

# The agent hook events custody acts on (see agent_hook.py): the plugin's hookimpl
# returns at once, importing nothing, on every other event (every tool call).
AGENT_EVENTS_HANDLED = frozenset({"SessionStart", "PostToolUse", "SessionEnd"})
# A refresh within this many seconds of the last one writes nothing. Far inside the
# sweep's stale window (600 s), so a working agent's heartbeat is never a candidate.
# Declared to the hook's dispatcher too (plugin.py), which then skips the PostToolUse
# calls inside it without building the host.
REFRESH_INTERVAL_SECONDS = 60.0
