"""What one ``hostcore hook`` run may spend, by event: counted from its process's start.

Imports only the standard library: the lean path (:mod:`hostcore.agents.lean_path`)
gives its handlers the same budget as the full one (:mod:`hostcore.agents.hook`).
"""

from __future__ import annotations

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# What a hook run may spend, counted from its process's start, by event (seconds).
# Stop reads a session's transcript; SessionEnd's comes from the agent's own limit.
# Stop's leaves 0.2 s of its 1 s goal (docs/benchmarks.md) for what follows the read:
# the gates' Stop check, closing the store, the exit.
BUDGET_SECONDS = {"Stop": 0.8}
# What a plugin is given at least, however long the start took: a loaded machine can
# spend Stop's whole budget before the first plugin is called, and a Stop hook's own
# timeout (30 s, hostcore.agents.install) has room for it. SessionEnd has none: its
# agent's limit is shared and hard.
BUDGET_FLOOR_SECONDS = {"Stop": 0.25}
DEFAULT_BUDGET_SECONDS = 0.5
# What all SessionEnd hooks get together: Claude Code 1.5 s unless raised with its
# variable (milliseconds), Codex 3 s.
SESSION_END_LIMIT_SECONDS = {"claude-code": 1.5, "codex": 3.0}
SESSION_END_LIMIT_ENV = "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS"
# What a SessionEnd leaves of that limit for the other plugins' work and the exit: on
# a machine at load 13 on 2 cores those took up to 0.8 s after a 0.7 s budget, so 1.5 s
# exactly (docs/benchmarks.md); 0.9 s keeps the worst run inside Claude Code's 1.5 s.
SESSION_END_MARGIN_SECONDS = 0.9


def budget_seconds(event: str, agent: str, env: Mapping[str, str]) -> float:
    """What a hook run for ``event`` may spend, from its process's start (seconds)."""
    if event != "SessionEnd":
        return BUDGET_SECONDS.get(event, DEFAULT_BUDGET_SECONDS)
    limit = SESSION_END_LIMIT_SECONDS.get(agent, SESSION_END_LIMIT_SECONDS["claude-code"])
    raised = env.get(SESSION_END_LIMIT_ENV, "") if agent == "claude-code" else ""
    if raised.strip().isdigit():
        limit = int(raised) / 1000
    return max(0.0, limit - SESSION_END_MARGIN_SECONDS)
