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

Usage, counts only (see :mod:`hostcore.evidence.usage_fields`): an assistant
line's ``message.usage`` gives the payload's ``usage`` (model and token kinds),
named by its message id and request id (``requestId``, or ``requestRef`` in
newer versions), since one response is written on one line per content block
and must count once. Those lines follow one another, so only the first of a run
carries the ``usage`` (the file's cursor context remembers the last response's
digest, so a run split between two reads is caught too); the store still counts a
response once across files and runs (a resumed session copies earlier lines, and
lines of two responses could interleave). Its ``tool_use`` blocks give ``tools`` (names), a user
line's ``tool_result`` blocks ``tool_results`` (how many ended ok, how many in
error). The session's own summary lines carry no ``cwd``: ``cost-state``
(durations, lines added and removed) and ``tools-used`` (tool names) are filed
under the directory and time of the file's last line that had them, so
withholding applies to them as to the rest; ``api-request-blob`` and every other
line without a ``cwd`` give no row. A usage field of the wrong type, out of
range, or a name with control characters makes the line count as malformed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from hostcore.evidence import usage_fields
from hostcore.evidence.rows import EvidenceRow
from hostcore.evidence.transcripts import FileState, Line, TranscriptSource, data_key, parse_one
from hostcore.evidence.usage_fields import BadUsage, Count

NAME = "claude-code"
EVENT = "claude_code.read"
PATTERNS = ("projects/*/*.jsonl", "projects/*/*/subagents/*.jsonl")
# The summary lines without a cwd that are filed under the session's directory.
SUMMARY_TYPES = ("cost-state", "tools-used")
# cost-state's fields (milliseconds and lines), as Summary names them -> on a row.
_SUMMARY_FIELDS = {"total_api_duration": "api_duration_ms",
                   "total_tool_duration": "tool_duration_ms",
                   "total_duration": "duration_ms",
                   "total_lines_added": "lines_added",
                   "total_lines_removed": "lines_removed"}


class Usage(msgspec.Struct, gc=False):
    """Token counts of one response, checked by msgspec as it decodes the line: a
    count of the wrong type or out of range fails the decode (counted malformed)."""

    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None


class Block(msgspec.Struct):
    type: Any = None
    name: Any = None
    is_error: Any = None


class Message(msgspec.Struct):
    id: Any = None
    model: Any = None
    usage: Usage | None = None
    content: msgspec.Raw = msgspec.Raw()  # decoded only for tool blocks


class ClaudeLine(msgspec.Struct, rename="camel"):
    """The fields of a transcript line this source uses; the rest is skipped unread."""

    type: str = ""
    cwd: str | None = None
    session_id: str | None = None
    timestamp: str = ""
    uuid: str | None = None
    git_branch: str | None = None
    message: Message | None = None
    request_id: Any = None
    request_ref: Any = None


class Summary(msgspec.Struct, rename="camel"):
    """A ``cost-state`` or ``tools-used`` line: counts and tool names, no content."""

    type: str = ""
    session_id: str | None = None
    total_api_duration: Any = msgspec.field(default=None, name="totalAPIDuration")
    total_tool_duration: Any = None
    total_duration: Any = None
    total_lines_added: Any = None
    total_lines_removed: Any = None
    tools: Any = None


_decoder = msgspec.json.Decoder(ClaudeLine)
# The first bytes of a message content that is a string or null: no tool blocks.
_NO_BLOCKS = frozenset(b'"n')
_summary_decoder = msgspec.json.Decoder(Summary)
_blocks_decoder = msgspec.json.Decoder(list[Block])


def parse_line(source: TranscriptSource, name: str, line: Line,
               state: FileState) -> EvidenceRow | None:
    """One evidence row for a transcript line, or ``None`` (counted) when it gives none."""
    if line.oversized:
        source.counts.oversized += 1
        return None
    return parse_one(parse_lines, source, name, line.data, state)


def parse_lines(source: TranscriptSource, name: str, lines: list[bytes], state: FileState,
                rows: list[EvidenceRow]) -> None:
    """The rows of a block of complete lines, appended to ``rows``: for each line,
    what :func:`parse_line` gives (the reader's :data:`LinesParser
    <hostcore.evidence.transcripts.LinesParser>`, which saves it the calls per line)."""
    counts = source.counts
    context = state.context
    decode, keep = _decoder.decode, rows.append  # looked up once: the loop runs a line
    directory = remote = ""  # the last line's, and its remote: lines come in runs of one
    for data in lines:
        try:
            record = decode(data)
        except msgspec.DecodeError:
            counts.malformed += 1
            continue
        if not record.cwd:
            if record.type in SUMMARY_TYPES and context.get("cwd"):
                summary = _summary_row(source, name, data, state)
                if summary is not None:
                    keep(summary)
                continue
            counts.no_cwd += 1
            continue
        session = record.session_id or Path(name).stem
        payload: dict[str, Any] = {"type": record.type}
        if record.git_branch:
            payload["branch"] = record.git_branch
        message = record.message
        if message is not None:
            # Text or null is told by the first byte, without reading it through;
            # a line with neither usage nor blocks (most of some transcripts)
            # skips the call.
            content = message.content
            blocks = bool(content) and memoryview(content)[0] not in _NO_BLOCKS
            if blocks or message.usage is not None:
                try:
                    _add_usage(payload, record, data, context, blocks)
                except (BadUsage, msgspec.DecodeError):
                    counts.malformed += 1
                    continue
        # Where the session's summary lines, which carry neither, are filed.
        if context.get("cwd") != record.cwd:
            context["cwd"] = record.cwd
        if record.timestamp:
            context["ts"] = record.timestamp
        if record.cwd != directory:
            directory, remote = record.cwd, source.remote_of(record.cwd)
        keep(EvidenceRow(
            partition=NAME,
            source_id=NAME,
            session_id=session,
            ts=record.timestamp,
            directory=directory,
            git_remote=remote,
            payload=payload,
            key=f"{session}:{record.uuid}" if record.uuid else data_key(session, data),
        ))


def _add_usage(payload: dict[str, Any], record: ClaudeLine, data: bytes,
               context: dict[str, str], blocks: bool) -> None:
    """Put the line's token counts (unless the file's previous line with usage was of
    the same response) and, when its content is no text or null (``blocks``), its
    tool names and outcomes on ``payload``."""
    message = record.message
    assert message is not None
    usage = message.usage
    if usage is not None:
        model = "unknown" if message.model is None else usage_fields.name(message.model)
        request = record.request_id if record.request_id is not None else record.request_ref
        if type(message.id) is str and type(request) is str:
            response = usage_fields.response_digest(message.id, request)
        else:
            # Nothing names the response: it counts on its own (as ccusage counts it).
            response = usage_fields.response_digest(record.session_id or "", record.uuid or "",
                                                    record.timestamp)
        # A run of lines of one response: the first carries its usage. Its rows and
        # the store's aggregate then hold the same one count, and the later lines
        # cost the append nothing; the store's own check is for the rest.
        if context.get("response") != response:
            context["response"] = response
            payload["usage"] = usage_fields.tokens(model, (
                usage.input_tokens or 0, usage.output_tokens or 0,
                usage.cache_creation_input_tokens or 0, usage.cache_read_input_tokens or 0),
                response)
    if not blocks:
        return
    # Decoded whatever its blocks are: msgspec skips the fields a Block has not
    # faster than a search of the line's bytes for a tool block's name would be.
    try:
        found = _blocks_decoder.decode(message.content)
    except msgspec.DecodeError:
        # No list of blocks (a list of something else, an object, a number):
        # malformed where the line names a tool block, which its counts would
        # then miss; else it holds none.
        if b'"tool_use"' in data or b'"tool_result"' in data:
            raise
        return
    tools = [usage_fields.name(b.name) for b in found if b.type == "tool_use"]
    if tools:
        payload["tools"] = tools
    results = [b.is_error is True for b in found if b.type == "tool_result"]
    if results:
        payload["tool_results"] = {"ok": results.count(False), "error": results.count(True)}


def _summary_row(source: TranscriptSource, name: str, data: bytes,
                 state: FileState) -> EvidenceRow | None:
    """A row for a summary line, under the directory and time of the file's last line."""
    counts = source.counts
    try:
        record = _summary_decoder.decode(data)
        payload: dict[str, Any] = {"type": record.type}
        if record.type == "tools-used":
            if not isinstance(record.tools, list):
                raise BadUsage("tools is not a list")
            payload["tools"] = [usage_fields.name(tool) for tool in record.tools]
        else:
            found = {field: getattr(record, attribute)
                     for attribute, field in _SUMMARY_FIELDS.items()}
            payload["summary"] = {field: usage_fields.measure(value)
                                  for field, value in found.items() if value is not None}
    except (msgspec.DecodeError, BadUsage):
        counts.malformed += 1
        return None
    context = state.context
    directory = context["cwd"]
    session = record.session_id or Path(name).stem
    return EvidenceRow(
        partition=NAME,
        source_id=NAME,
        session_id=session,
        ts=context.get("ts", ""),
        directory=directory,
        git_remote=source.remote_of(directory),
        payload=payload,
        key=data_key(session, data),
    )
