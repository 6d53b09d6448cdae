"""The ``codex`` plugin: registers the Codex CLI rollout source.

Configured by the ``[plugins.codex]`` table of ``hostcore.toml``::

    [plugins.codex]
    home = "/home/me"     # the user's home; rollouts under <home>/.codex/sessions
    follow_symlinks = false  # read files behind symlinks that lead out of the folder

Without ``home`` the folder is ``$CODEX_HOME`` when set, else ``~/.codex``. A
missing folder gives no rows (Codex is not installed). Archived sessions, which
Codex moves out of ``sessions/``, are not read; what was ingested stays.
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
from hostcore_codex.source import EVENT, NAME, PATTERNS, parse_line, parse_lines

if TYPE_CHECKING:
    from hostcore.agents.events import AgentEvent
    from hostcore.host import Host

class CodexConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The ``[plugins.codex]`` table. Unknown keys are errors, so typos show."""

    home: str | None = None
    # Read transcripts reached through symlinks that lead out of the folder
    # (by default they are counted as `outside` and skipped).
    follow_symlinks: bool = False


def codex_folder(config: CodexConfig, env: Mapping[str, str]) -> Path:
    """Where Codex keeps its data for this configuration and environment."""
    if config.home:
        return Path(config.home).expanduser() / ".codex"
    override = env.get("CODEX_HOME")
    return Path(override).expanduser() if override else Path.home() / ".codex"


@hookimpl
def hostcore_sources(host: Host) -> TranscriptSource:
    config = host.plugin_config(NAME, CodexConfig)
    return TranscriptSource(name=NAME, folder=codex_folder(config, host.env),
                            patterns=PATTERNS, parse=parse_line, event=EVENT, emit=host.emit,
                            follow_symlinks=config.follow_symlinks, parse_lines=parse_lines)


@hookimpl
def hostcore_events() -> EventSpec:
    return EventSpec(
        EVENT,
        READ_EVENT_ATTRIBUTES,
        "The Codex source read its rollouts: files with new lines, lines read, rows "
        "produced, lines skipped as malformed, oversized or before a session header with "
        "a cwd, files that could not be read, and whether the sessions folder is missing.",
    )


@hookimpl
@agent_interest(*SESSION_INGEST_EVENTS)
def hostcore_agent_event(event: AgentEvent, host: Host) -> None:
    """At Stop and SessionEnd, ingest that session's transcript now, within its budget."""
    ingest_session_transcript(host, NAME, event)
