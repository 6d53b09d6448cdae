"""The stdio transport: ``initialize`` answered before the SDK loads, and a client
that leaves mid-call noted.

An agent starts ``hostcore mcp`` and waits for its answer to ``initialize``
before anything else; importing the MCP SDK takes longer than the rest of a
start. So this module reads the client's first message before the SDK (and the
tools on it) is loaded: a valid ``initialize`` is answered at once from
:mod:`hostcore_mcp.handshake`, and then handed to the SDK, once loaded, as if it
had just arrived, with everything after it. (The SDK is not loaded on a thread
beside the wait: an import holds the interpreter for long stretches, which the
answer would have to wait out, and the client sends initialize first anyway.) The
SDK's own answer to it is not sent again; it is compared with the one sent
(a difference is logged: the handshake module lags the installed SDK).

The SDK reads and writes through the two small files below, which also keep
count of the requests read and not yet answered: when the client leaves (its
input ends, or its output is closed) with calls unanswered, that is logged as
one protocol-level line, and the server ends with exit 0 once its calls are done.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import IO, Any

import anyio
import msgspec

from hostcore_mcp.handshake import initialize_result

log = logging.getLogger("hostcore.mcp")

Loaded = Callable[[], Any]


class _Envelope(msgspec.Struct):
    """What the transport reads of a JSON-RPC message: whether it asks or answers."""

    id: int | str | None = None
    method: str | None = None
    params: Any = None


_decode = msgspec.json.Decoder(_Envelope)
_encode = msgspec.json.Encoder(order="sorted")


def _envelope(line: bytes | str) -> _Envelope | None:
    try:
        return _decode.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # not JSON-RPC: the SDK answers a parse error itself


class _Wire:
    """The requests read and not yet answered, and whether the client went away."""

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.gone = False
        self._lock = threading.Lock()

    def asked(self, message: _Envelope) -> None:
        if message.method is not None and message.id is not None:
            with self._lock:
                self.pending.add(repr(message.id))

    def answered(self, message: _Envelope) -> None:
        if message.method is None and message.id is not None:
            with self._lock:
                self.pending.discard(repr(message.id))


class _Input:
    """The client's lines for the SDK: the ones read before it loaded, then stdin."""

    def __init__(self, stream: IO[bytes], replay: list[bytes], wire: _Wire) -> None:
        self._stream = stream
        self._replay = replay
        self._wire = wire

    def readline(self) -> str:
        if self._replay:
            return self._replay.pop(0).decode("utf-8", "replace")
        line = self._stream.readline()
        if line:
            message = _envelope(line)
            if message is not None:
                self._wire.asked(message)
        return line.decode("utf-8", "replace")


class _Output:
    """The SDK's lines to the client, written to fd 1 unbuffered, less its answer to
    the ``initialize`` already answered (compared with that answer instead)."""

    def __init__(self, fd: int, wire: _Wire, sent: tuple[int | str, Any] | None) -> None:
        self._fd = fd
        self._wire = wire
        self._sent = sent
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        message = _envelope(text)
        if message is not None and self._is_the_answer_sent(text, message):
            return len(text)
        data = text.encode()
        with self._lock:
            try:
                while data and not self._wire.gone:
                    data = data[os.write(self._fd, data):]
            except OSError:
                # EPIPE: nobody reads the answers any more. Not an error of the server.
                self._wire.gone = True
        if message is not None and not self._wire.gone:
            self._wire.answered(message)
        return len(text)

    def flush(self) -> None:
        """Every write went to the descriptor already."""

    def _is_the_answer_sent(self, text: str, message: _Envelope) -> bool:
        if self._sent is None or message.method is not None or message.id != self._sent[0]:
            return False
        sent, self._sent = self._sent[1], None
        if msgspec.json.decode(text).get("result") != sent:
            log.warning("hostcore mcp: the MCP SDK answered initialize otherwise than "
                        "hostcore_mcp.handshake did; update the handshake to this SDK")
        return True


def serve(stdin: IO[bytes], stdout_fd: int, load: Loaded) -> None:
    """Serve one client on ``stdin`` / ``stdout_fd`` with the MCPServer ``load`` builds.

    The client's first line is read and, when it is a valid ``initialize``, answered
    before ``load`` imports the SDK: the client's next lines wait in the pipe.
    """
    wire = _Wire()
    first = stdin.readline()
    if not first:
        return  # the client left before saying anything: nothing to serve
    sent: tuple[int | str, Any] | None = None
    message = _envelope(first)
    if message is not None:
        wire.asked(message)
        result = initialize_result(message.params) if message.method == "initialize" \
            else None
        if result is not None and message.id is not None:
            answer = _encode.encode({"jsonrpc": "2.0", "id": message.id, "result": result})
            os.write(stdout_fd, answer + b"\n")
            wire.answered(_Envelope(id=message.id))
            sent = (message.id, result)
    server = load()
    anyio.run(_run, server, _Input(stdin, [first], wire), _Output(stdout_fd, wire, sent))
    if wire.pending:
        log.warning("hostcore mcp: the client went away before its answer was sent "
                    "(%d call(s)); ending", len(wire.pending))


async def _run(server: Any, stdin: _Input, stdout: _Output) -> None:
    from mcp.server.stdio import stdio_server

    # The MCPServer's own run_stdio_async, on these files instead of the process's
    # streams: MCPServer has no public way to be given them.
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=anyio.wrap_file(stdin),  # type: ignore[arg-type]
                            stdout=anyio.wrap_file(stdout)) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
