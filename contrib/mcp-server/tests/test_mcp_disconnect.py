"""A client that leaves in the middle of a call: a note, no crash, no lock left held.

The call is held open by the test, not by a slow path in the server: the last poll
cycle's report (``ledger/last-cycle.json``), which every ``work_items`` answer
reads, is a named pipe here. The server's read of it waits until the test writes
the report; a non-blocking open for writing succeeds only once the server has the
pipe open for reading, which is how the test knows the call is under way. So
every step waits on an event, never on a delay:

* over streamable HTTP the client resets its connection while the server waits;
  the server notes that a client left before its answer, serves the next client,
  and ends cleanly on SIGTERM;
* over stdio the client process is killed (SIGKILL) while the server waits; once
  the call is done the server notes the client went away and exits 0.

Either way a ``hostcore run --once`` on the root afterwards succeeds.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hostcore.workitems.poller import LAST_CYCLE_FILE

# Generous bounds on waiting for an event: they only end a test that would hang.
EVENT_WAIT_SECONDS = 120
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "leaver", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "work_items", "arguments": {}}}
HTTP_NOTE = "a client disconnected before its answer was sent"
STDIO_NOTE = "the client went away before its answer was sent"


def blocking_root(tmp_path: Path) -> tuple[Path, Path]:
    """A root whose last-cycle report is a named pipe: reading it waits for a writer."""
    root = tmp_path / "root"
    (root / "ledger").mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    fifo = root / "ledger" / LAST_CYCLE_FILE
    os.mkfifo(fifo, 0o600)
    return root, fifo


def reader_has_opened(fifo: Path) -> int:
    """Wait until the server has the pipe open for reading (it is in the call); the
    write end, held open so the server's read waits for what the test writes."""
    deadline = time.monotonic() + EVENT_WAIT_SECONDS
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            # ENXIO: no reader yet, so the server has not reached the read.
            assert exc.errno == errno.ENXIO, exc
        assert time.monotonic() < deadline, "the server never read the report"
        time.sleep(0.05)


def finish_the_call(fifo: Path, write_end: int) -> None:
    """Give the waiting read an empty report (no cycle on record), then take the pipe
    away so later commands find no report at all."""
    os.write(write_end, b"[]")
    os.close(write_end)
    fifo.unlink()


class Lines:
    """A process's stderr, read by a thread, so a test can wait for one line."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((line for line in self.lines if text in line), None),
                timeout=EVENT_WAIT_SECONDS)
        assert found, f"no line with {text!r} in: {''.join(self.lines)}"
        return found

    def text(self) -> str:
        self._thread.join(timeout=EVENT_WAIT_SECONDS)
        return "".join(self.lines)


def post(connection: http.client.HTTPConnection, message: dict[str, Any],
         session: str | None = None) -> http.client.HTTPResponse:
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               **({"Mcp-Session-Id": session} if session else {})}
    connection.request("POST", "/mcp", body=json.dumps(message), headers=headers)
    return connection.getresponse()


@contextlib.contextmanager
def http_server(root: Path, root_env: Any) -> Iterator[tuple[subprocess.Popen[str], str, Lines]]:
    process = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "mcp",
                                "--http", "127.0.0.1:0"], env=root_env(root),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert "serving " in first, first + process.stderr.read()
        yield process, first.split("serving ", 1)[1].strip(), Lines(process.stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_http_client_that_resets_mid_call_is_noted_and_the_next_client_is_served(
        tmp_path, root_env, hostcore):
    root, fifo = blocking_root(tmp_path)
    with http_server(root, root_env) as (server, url, stderr):
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=EVENT_WAIT_SECONDS)
        opened = post(connection, INITIALIZE)
        session = opened.getheader("Mcp-Session-Id")
        assert opened.status == 200 and session, opened.status
        opened.read()
        post(connection, INITIALIZED, session).read()
        # The call goes out and the client never reads its answer.
        connection.putrequest("POST", "/mcp")
        body = json.dumps(CALL).encode()
        for name, value in (("Content-Type", "application/json"),
                            ("Accept", "application/json, text/event-stream"),
                            ("Mcp-Session-Id", session), ("Content-Length", str(len(body)))):
            connection.putheader(name, value)
        connection.endheaders(body)
        write_end = reader_has_opened(fifo)
        sock = connection.sock
        assert sock is not None
        # Linger 0: the close resets the connection, as a killed client's kernel does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
        note = stderr.wait_for(HTTP_NOTE)
        finish_the_call(fifo, write_end)

        async def next_client() -> dict[str, Any]:
            async with httpx2.AsyncClient(timeout=EVENT_WAIT_SECONDS) as client, \
                    Client(streamable_http_client(url, http_client=client)) as mcp:
                answer = await mcp.call_tool("work_items", {})
                return dict(answer.structured_content)

        served = anyio.run(next_client)
        assert server.poll() is None  # still serving
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then ends by the signal it caught, as the shell expects.
        assert server.wait(timeout=EVENT_WAIT_SECONDS) in (0, -signal.SIGTERM)
    assert served["matched"] == 0 and served["listing"]["age_seconds"] is None
    assert "tools/call" not in note and str(root) not in note  # a protocol note only
    assert "Traceback" not in stderr.text()
    done = hostcore(root, "run", "--once")  # no lock was left held
    assert done.returncode == 0, done.stderr


CLIENT = """
import json, os, sys
to_server, from_server = int(sys.argv[1]), int(sys.argv[2])
def send(message):
    os.write(to_server, (json.dumps(message) + "\\n").encode())
send(json.loads(sys.argv[3]))
reader = os.fdopen(from_server, "rb")
reader.readline()
send(json.loads(sys.argv[4]))
send(json.loads(sys.argv[5]))
print("sent", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_stdio_client_killed_mid_call_ends_the_server_cleanly_with_a_note(
        tmp_path, root_env, hostcore):
    root, fifo = blocking_root(tmp_path)
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    server = subprocess.Popen([sys.executable, "-m", "hostcore", "--root", str(root), "mcp"],
                              env=root_env(root), stdin=to_server_r, stdout=from_server_w,
                              stderr=subprocess.PIPE, text=True)
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(to_server_w),
                               str(from_server_r), json.dumps(INITIALIZE),
                               json.dumps(INITIALIZED), json.dumps(CALL)],
                              pass_fds=(to_server_w, from_server_r), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    # Only the two processes hold the pipes: the client's death closes its ends.
    for fd in (to_server_r, to_server_w, from_server_r, from_server_w):
        os.close(fd)
    try:
        assert server.stderr is not None and client.stdout is not None
        stderr = Lines(server.stderr)
        assert client.stdout.readline().strip() == "sent"
        write_end = reader_has_opened(fifo)
        client.kill()
        client.wait(timeout=EVENT_WAIT_SECONDS)
        finish_the_call(fifo, write_end)
        assert server.wait(timeout=EVENT_WAIT_SECONDS) == 0, stderr.text()
    finally:
        for process in (client, server):
            if process.poll() is None:
                process.kill()
                process.wait()
    said = stderr.text()
    assert STDIO_NOTE in said and "Traceback" not in said, said
    done = hostcore(root, "run", "--once")
    assert done.returncode == 0, done.stderr

