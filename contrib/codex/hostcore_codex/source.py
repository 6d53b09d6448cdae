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

Usage, counts only (see :mod:`hostcore.evidence.usage_fields`): a ``token_count``
event's ``info.total_token_usage`` is the session's running total, and Codex
writes it again without a new response at times, so a row's ``usage`` is what the
total grew by since the file's last one (kept in the file's context with the
model its latest ``turn_context`` named); an event whose total did not grow
carries none. The kinds: ``input_tokens`` less ``cached_input_tokens`` as input,
``cached_input_tokens`` as cache reads, ``output_tokens`` (reasoning included) as
output. Without a total, ``last_token_usage`` is the response's own. A figure of
the wrong type or out of range makes the line count as malformed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from hostcore.evidence import usage_fields
from hostcore.evidence.rows import EvidenceRow
from hostcore.evidence.transcripts import (
    FileState,
    Line,
    TranscriptSource,
    data_key,
    json_string_field,
    parse_one,
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
    model: Any = None


class TokenUsage(msgspec.Struct, gc=False):
    """One of a ``token_count`` event's figures, checked by msgspec as it decodes the
    event: a count of the wrong type or out of range fails the decode (counted
    malformed), never taken for a count."""

    input_tokens: usage_fields.Count | None = None
    cached_input_tokens: usage_fields.Count | None = None
    output_tokens: usage_fields.Count | None = None


class TokenInfo(msgspec.Struct, gc=False):
    total_token_usage: TokenUsage | None = None
    last_token_usage: TokenUsage | None = None


class TokenCount(msgspec.Struct, gc=False):
    """An ``event_msg`` payload; only a ``token_count`` one is decoded as this."""

    type: str = ""
    info: TokenInfo | None = None


class RolloutLine(msgspec.Struct):
    timestamp: str = ""
    type: str = ""
    payload: msgspec.Raw = msgspec.Raw()  # empty when absent; decoded only when needed


_line_decoder = msgspec.json.Decoder(RolloutLine)
# The running total a token count last wrote to a file's context: as written, and
# its numbers.
_last_total: tuple[str, tuple[int, ...]] = ("0,0,0", (0, 0, 0))
_payload_decoder = msgspec.json.Decoder(Payload | None)
_token_decoder = msgspec.json.Decoder(TokenCount | None)


def parse_line(source: TranscriptSource, name: str, line: Line,
               state: FileState) -> EvidenceRow | None:
    """One evidence row for a rollout line, or ``None`` (counted) when it gives none."""
    if line.oversized:
        source.counts.oversized += 1
        data = line.data
        if json_string_field(data, "type") == "session_meta":
            _remember_header(state.context, name, json_string_field(data, "id"),
                             json_string_field(data, "cwd"),
                             json_string_field(data, "repository_url"))
        return None
    return parse_one(parse_lines, source, name, line.data, state)


def parse_lines(source: TranscriptSource, name: str, lines: list[bytes], state: FileState,
                rows: list[EvidenceRow]) -> None:
    """The rows of a block of complete lines, appended to ``rows``: for each line,
    what :func:`parse_line` gives (the reader's :data:`LinesParser
    <hostcore.evidence.transcripts.LinesParser>`, which saves it the calls per line)."""
    counts = source.counts
    context = state.context
    decode, keep = _line_decoder.decode, rows.append  # looked up once: the loop runs a line
    # The file's directory, session and remote, read from its context again only
    # when a header or turn context changes it (the remote when a row needs it).
    directory, session, remote = context.get("cwd"), context.get("session", ""), None
    for data in lines:
        try:
            record = decode(data)
            payload = (_payload_decoder.decode(record.payload)
                       if record.type in ("session_meta", "turn_context") and record.payload
                       else None)
        except msgspec.DecodeError:
            counts.malformed += 1
            continue
        if payload is not None:
            if record.type == "session_meta":
                _remember_header(context, name, payload.id, payload.cwd,
                                 payload.git.repository_url if payload.git else None)
            elif payload.cwd:
                context["cwd"] = payload.cwd
            directory, session, remote = context.get("cwd"), context.get("session", ""), None
        if not directory:
            counts.no_cwd += 1
            continue
        row_payload: dict[str, Any] = {"type": record.type}
        try:
            if payload is not None and payload.model is not None:
                context["model"] = usage_fields.name(payload.model)
            # Looked for in the bytes first: most event_msg lines are no token count.
            if record.type == "event_msg" and b'"token_count"' in data:
                _add_usage(row_payload, context, session, record.payload)
        except (usage_fields.BadUsage, msgspec.DecodeError):
            counts.malformed += 1
            continue
        if remote is None:
            remote = context.get("remote") or source.remote_of(directory)
        keep(EvidenceRow(
            partition=NAME,
            source_id=NAME,
            session_id=session,
            ts=record.timestamp,
            directory=directory,
            git_remote=remote,
            payload=row_payload,
            key=data_key(session, data),
        ))


def _figures(usage: TokenUsage) -> tuple[int, int, int]:
    """Input, cached input and output of one ``token_count`` figure, checked."""
    found = (usage.input_tokens or 0, usage.cached_input_tokens or 0, usage.output_tokens or 0)
    if found[1] > found[0]:
        raise usage_fields.BadUsage("more cached input than input")
    return found


def _add_usage(payload: dict[str, Any], context: dict[str, str], session: str,
               raw: msgspec.Raw) -> None:
    """Put what this ``token_count`` event adds to the session on ``payload``."""
    event = _token_decoder.decode(raw)
    if event is None or event.type != "token_count" or event.info is None:
        return
    info = event.info
    if info.total_token_usage is not None:
        global _last_total
        total = _figures(info.total_token_usage)
        then_text = context.get("total", "0,0,0")
        # The file's previous total is nearly always the one written last: its
        # numbers are kept, not parsed back from the text.
        last = _last_total
        then = last[1] if then_text == last[0] else tuple(map(int, then_text.split(",")))
        # Written out, not zipped: this runs for every token count.
        grew = (total[0] - then[0], total[1] - then[1], total[2] - then[2])
        context["total"] = text = f"{total[0]},{total[1]},{total[2]}"
        _last_total = (text, total)  # one assignment: a reading thread sees either pair
        if min(grew) < 0:
            # The total started over (a new file of a resumed session): this
            # response is the last figure, or the whole total when there is none.
            grew = (_figures(info.last_token_usage) if info.last_token_usage is not None
                    else total)
        if not any(grew):
            return  # the same total written again: no new response
        response = usage_fields.response_digest(session, context["total"])
    elif info.last_token_usage is not None:
        grew = _figures(info.last_token_usage)
        response = usage_fields.response_digest(session, bytes(raw).hex())
    else:
        return
    fresh, cached, output = grew[0] - grew[1], grew[1], grew[2]
    if fresh < 0:
        raise usage_fields.BadUsage("more cached input than input")
    payload["usage"] = usage_fields.tokens(context.get("model", "unknown"),
                                           (fresh, output, 0, cached), response)


def _remember_header(context: dict[str, str], name: str, session: str | None,
                     cwd: str | None, remote: str | None) -> None:
    context.clear()
    context["session"] = session or Path(name).stem
    if cwd:
        context["cwd"] = cwd
    if remote:
        context["remote"] = strip_credentials(remote)
