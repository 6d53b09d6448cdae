"""Codex CLI rollouts: ``<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Each line is ``{"timestamp", "type", "payload"}``. The first is ``session_meta``:
its payload holds the session ``id``, the ``cwd`` and, when Codex found a
repository, ``git`` with ``commit_hash``, ``branch`` and ``repository_url``.
``turn_context`` payloads repeat the ``cwd`` (it can change mid-session); every
other type (``response_item``, ``event_msg``, ``compacted``, types yet to come)
is evidence of the session in its current directory.

The session id, directory and remote of a file live in the file's cursor
context, so a later read resumes mid-file without re-reading the header. The
header can be large (it may embed instructions): when it passes the line cap,
the id, cwd and repository URL are taken from the part that was read.

One row per line once the header is known: partition and source id ``codex``,
the remote from ``git.repository_url`` (credentials stripped) or else the
directory's git config. The dedupe key is ``<session id>:<content digest>``, so
reading a file again, or an archived file moved back, adds nothing.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from hostcore.evidence.rows import EvidenceRow
from hostcore.evidence.transcripts import (
    FileState,
    Line,
    TranscriptSource,
    json_string_field,
    line_key,
    strip_credentials,
)

NAME = "codex"
EVENT = "codex.read"
PATTERNS = ("sessions/*/*/*/rollout-*.jsonl", "sessions/rollout-*.jsonl")


class GitInfo(msgspec.Struct):
    repository_url: str | None = None


class Payload(msgspec.Struct):
    """The payload fields this source uses, of ``session_meta`` and ``turn_context``."""

    id: str | None = None
    cwd: str | None = None
    git: GitInfo | None = None


class RolloutLine(msgspec.Struct):
    timestamp: str = ""
    type: str = ""
    payload: msgspec.Raw = msgspec.Raw()  # empty when absent; decoded only when needed


_line_decoder = msgspec.json.Decoder(RolloutLine)
_payload_decoder = msgspec.json.Decoder(Payload | None)


def parse_line(source: TranscriptSource, name: str, line: Line,
               state: FileState) -> EvidenceRow | None:
    """One evidence row for a rollout line, or ``None`` (counted) when it gives none."""
    counts = source.counts
    context = state.context
    if line.oversized:
        counts.oversized += 1
        if json_string_field(line.data, "type") == "session_meta":
            _remember_header(context, name, json_string_field(line.data, "id"),
                             json_string_field(line.data, "cwd"),
                             json_string_field(line.data, "repository_url"))
        return None
    try:
        record = _line_decoder.decode(line.data)
        payload = (_payload_decoder.decode(record.payload)
                   if record.type in ("session_meta", "turn_context") and record.payload
                   else None)
    except msgspec.DecodeError:
        counts.malformed += 1
        return None
    if payload is not None and record.type == "session_meta":
        _remember_header(context, name, payload.id, payload.cwd,
                         payload.git.repository_url if payload.git else None)
    elif payload is not None and payload.cwd:
        context["cwd"] = payload.cwd
    directory = context.get("cwd")
    if not directory:
        counts.no_cwd += 1
        return None
    session = context.get("session", "")
    return EvidenceRow(
        partition=NAME,
        source_id=NAME,
        session_id=session,
        ts=record.timestamp,
        directory=directory,
        git_remote=context.get("remote") or source.remote_of(directory),
        payload={"type": record.type},
        key=line_key(session, line),
    )


def _remember_header(context: dict[str, str], name: str, session: str | None,
                     cwd: str | None, remote: str | None) -> None:
    context.clear()
    context["session"] = session or Path(name).stem
    if cwd:
        context["cwd"] = cwd
    if remote:
        context["remote"] = strip_credentials(remote)
