"""The ``claude-code`` plugin: registers the Claude Code transcript source.

Configured by the ``[plugins.claude-code]`` table of ``hostcore.toml``::

    [plugins.claude-code]
    home = "/home/me"     # the user's home; transcripts under <home>/.claude/projects
    follow_symlinks = false  # read files behind symlinks that lead out of the folder

Without ``home`` the folder is ``$CLAUDE_CONFIG_DIR`` when set, else
``~/.claude``. A missing folder gives no rows (Claude Code is not installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.evidence.transcripts import (
    READ_EVENT_ATTRIBUTES,
    SESSION_INGEST_EVENTS,
    TranscriptSource,
    ingest_session_transcript,
)
from hostcore.plugin.interest import agent_interest
from hostcore.plugin.markers import hookimpl
from hostcore.telemetry import EventSpec
from hostcore_claude_code.source import EVENT, NAME, PATTERNS, parse_line, parse_lines

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host

class ClaudeCodeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.claude-code]`` table. Unknown keys are errors, so typos show."""

    home: str | None = None
    # Read transcripts reached through symlinks that lead out of the folder
    # (by default they are counted as `outside` and skipped).
    follow_symlinks: bool = False


def claude_folder(config: ClaudeCodeConfig, env: Mapping[str, str]) -> Path:
    """Where Claude Code keeps its data for this configuration and environment."""
    if config.home:
        return Path(config.home).expanduser() / ".claude"
    override = env.get("CLAUDE_CONFIG_DIR")
    return Path(override).expanduser() if override else Path.home() / ".claude"


@hookimpl
def hostcore_sources(host: Host) -> TranscriptSource:
    config = host.plugin_config(NAME, ClaudeCodeConfig)
    return TranscriptSource(name=NAME, folder=claude_folder(config, host.env),
                            patterns=PATTERNS, parse=parse_line, event=EVENT, emit=host.emit,
                            follow_symlinks=config.follow_symlinks, parse_lines=parse_lines)


@hookimpl
def hostcore_events() -> EventSpec:
    return EventSpec(
        EVENT,
        READ_EVENT_ATTRIBUTES,
        "The Claude Code source read its transcripts: files with new lines, lines read, "
        "rows produced, lines skipped as malformed, oversized or without a cwd, files "
        "that could not be read, and whether the transcript folder is missing.",
    )


@hookimpl
@agent_interest(*SESSION_INGEST_EVENTS)
def hostcore_agent_event(event: AgentEvent, host: Host) -> None:
    """At Stop and SessionEnd, ingest that session's transcript now, within its budget."""
    ingest_session_transcript(host, NAME, event)
