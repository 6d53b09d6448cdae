"""Streamable HTTP for ``hostcore mcp --http``: where it may listen, and who may ask.

A loopback address is the default and the only one accepted without
``--allow-remote``: the server's answers name this machine's repositories and
work, which is nothing to serve to a network by accident. With
``--allow-remote`` a token is required, and every request without
``Authorization: Bearer <token>`` is answered ``401`` before the MCP layer sees
it. On loopback the SDK also checks ``Host`` and ``Origin`` (DNS rebinding).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("hostcore.mcp")

# Shorter tokens are refused: one that can be guessed protects nothing.
MIN_TOKEN_CHARS = 16
MCP_PATH = "/mcp"


class AddressError(ValueError):
    """``--http`` named an address the server will not listen on (a usage error)."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port (0: any free one)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise AddressError(f"--http {text!r}: expected HOST:PORT, such as 127.0.0.1:8765")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: whatever it resolves to, it is not known to stay here


def check_listen(host: str, *, allow_remote: bool, token: str | None) -> None:
    """Refuse a remote address without ``--allow-remote``, and one without a token."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise AddressError(f"the token is {len(token)} characters; use at least "
                           f"{MIN_TOKEN_CHARS} (such as `openssl rand -hex 32`)")
    if is_loopback(host):
        return
    if not allow_remote:
        raise AddressError(f"--http {host}: not a loopback address; the server would answer "
                           "the network. Add --allow-remote (and a token) to mean it")
    if token is None:
        raise AddressError("--allow-remote needs a token: --token or $HOSTCORE_MCP_TOKEN")


class BearerToken:
    """ASGI middleware answering ``401`` to any request without the bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body",
                        "body": b'{"error": "a bearer token is required (Authorization: '
                                b'Bearer <token>)"}'})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        return hmac.compare_digest(given, self._expected)


class DisconnectNote:
    """ASGI middleware noting, on stderr, a client that left before its answer was sent.

    The SDK drops such an answer without a word; the note tells whoever runs the
    server why a call was done for no one, and that it goes on serving. Only POSTs
    are watched: they carry the calls, while a client's GET stream (notifications)
    ends with its session in the ordinary course. The note names nothing asked.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        answered = noted = False

        async def receiving() -> Message:
            nonlocal noted
            message = await receive()
            if message["type"] == "http.disconnect" and not answered and not noted:
                noted = True
                log.warning("hostcore mcp: a client disconnected before its answer was "
                            "sent; the server goes on serving")
            return message

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True
            await send(message)

        await self.app(scope, receiving, sending)


def serve(app: ASGIApp, host: str, port: int, *, token: str | None,
          announce: Callable[[str], None]) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM; ``announce`` gets its URL.

    The socket is bound here, before the server starts, so port 0 reports the port
    the system chose and a port in use fails at once, naming the address.
    """
    app = DisconnectNote(app)
    if token is not None:
        app = BearerToken(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise AddressError(f"--http {host}:{port}: cannot listen: "
                           f"{exc.strerror or exc}") from None
    sock.listen(128)
    bound: Any = sock.getsockname()
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    announce(f"http://{shown}:{bound[1]}{MCP_PATH}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    try:
        anyio.run(_serve, uvicorn.Server(config), sock)
    finally:
        sock.close()


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    await server.serve(sockets=[sock])
