"""Claude Code transcripts: ``<claude dir>/projects/<project slug>/<session id>.jsonl``.

Each line is one JSON object. Conversation records carry ``cwd``, ``sessionId``,
``timestamp``, ``uuid``, ``gitBranch`` and ``type`` (``user``, ``assistant``,
``system``, ...); other records (``summary``, ``file-history-snapshot``) carry no
``cwd`` and give no row. Subagent transcripts sit beside the session
(``agent-*.jsonl``) or below it (``<session>/subagents/*.jsonl``) in newer
versions; both are read.

One row per line with a ``cwd``: partition and source id ``claude-code``, the
session id, the timestamp, the directory, the ``origin`` remote of that
directory's repository (Claude Code records none), and a payload of the record
type and git branch. The dedupe key is ``<sessionId>:<uuid>`` (a content digest
when a line has no uuid), so reading a file again adds nothing.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from hostcore.evidence.rows import EvidenceRow
from hostcore.evidence.transcripts import FileState, Line, TranscriptSource, line_key

NAME = "claude-code"
EVENT = "claude_code.read"
PATTERNS = ("projects/*/*.jsonl", "projects/*/*/subagents/*.jsonl")


class ClaudeLine(msgspec.Struct, rename="camel"):
    """The fields of a transcript line this source uses; the rest is skipped unread."""

    type: str = ""
    cwd: str | None = None
    session_id: str | None = None
    timestamp: str = ""
    uuid: str | None = None
    git_branch: str | None = None


_decoder = msgspec.json.Decoder(ClaudeLine)


def parse_line(source: TranscriptSource, name: str, line: Line,
               state: FileState) -> EvidenceRow | None:
    """One evidence row for a transcript line, or ``None`` (counted) when it gives none."""
    counts = source.counts
    if line.oversized:
        counts.oversized += 1
        return None
    try:
        record = _decoder.decode(line.data)
    except msgspec.DecodeError:
        counts.malformed += 1
        return None
    if not record.cwd:
        counts.no_cwd += 1
        return None
    session = record.session_id or Path(name).stem
    payload: dict[str, str] = {"type": record.type}
    if record.git_branch:
        payload["branch"] = record.git_branch
    return EvidenceRow(
        partition=NAME,
        source_id=NAME,
        session_id=session,
        ts=record.timestamp,
        directory=record.cwd,
        git_remote=source.remote_of(record.cwd),
        payload=payload,
        key=f"{session}:{record.uuid}" if record.uuid else line_key(session, line),
    )
