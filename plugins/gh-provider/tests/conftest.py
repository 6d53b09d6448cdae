"""Test doubles for gh: a fake ``gh`` executable, and a fake GitHub for the real one.

``fake_gh`` puts a Python script named ``gh`` first on a ``PATH`` of its own. The
script behaves like ``gh api -i``: it prints an HTTP status line, headers and a
body, exits 1 for a status of 300 or more (as gh does, 304 included) and 0
otherwise, and appends every call to a log. Routes and the log live in files,
so the double serves any number of processes (``hostcore poll --once`` from a
test is a separate process). A route answers with its replies in order; its last
reply repeats. A request no route matches gets a 404.

``fake_github`` is a plain-HTTP server on 127.0.0.1 for the real ``gh`` binary:
gh 2.23 sends requests for ``GH_HOST=github.localhost`` to
``http://api.github.localhost/`` and honours ``HTTP_PROXY``, so pointing the proxy
at the server makes it GitHub's API. ``GH_CONFIG_DIR`` is an empty folder, so no
real credential is ever read. It knows the faults real deployments meet: a failing
repository, a hang, a ``301`` redirect, a secondary rate limit.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

_SCRIPT = r'''#!__PYTHON__
import json, os, sys
from urllib.parse import parse_qsl, urlsplit

import time
state = os.environ["FAKE_GH_DIR"]
args = sys.argv[1:]
if args == ["--version"]:
    print("gh version 2.99.0 (fake)")
    sys.exit(0)
method, headers, target = "GET", {}, None
rest = args[1:] if args[:1] == ["api"] else []
i = 0
while i < len(rest):
    a = rest[i]
    if a == "-i":
        i += 1
    elif a == "-X":
        method = rest[i + 1]; i += 2
    elif a == "-H":
        k, _, v = rest[i + 1].partition(":"); headers[k.strip().lower()] = v.strip(); i += 2
    else:
        target = a; i += 1
parts = urlsplit(target or "")
query = dict(parse_qsl(parts.query))
with open(os.path.join(state, "routes.json")) as f:
    routes = json.load(f)
calls_path = os.path.join(state, "calls.jsonl")
served_path = os.path.join(state, "served.json")
served = {}
if os.path.exists(served_path):
    with open(served_path) as f:
        served = json.load(f)
best = None
for index, route in enumerate(routes):
    if route["method"] != method or route["path"] != parts.path.lstrip("/"):
        continue
    if any(query.get(k) != v for k, v in route["query"].items()):
        continue
    if best is None or len(route["query"]) > len(routes[best]["query"]):
        best = index
if best is None:
    reply = {"status": 404, "headers": {}, "body": '{"message": "Not Found"}'}
else:
    seen = served.get(str(best), 0)
    replies = routes[best]["replies"]
    reply = replies[min(seen, len(replies) - 1)]
    served[str(best)] = seen + 1
    with open(served_path, "w") as f:
        json.dump(served, f)
with open(calls_path, "a") as f:
    f.write(json.dumps({"argv": args, "method": method, "path": parts.path.lstrip("/"),
                        "query": query, "headers": headers, "route": best}) + "\n")
if reply.get("sleep"):
    sys.stdout.flush()
    time.sleep(reply["sleep"])  # a hung GitHub: the runner's deadline must end this
if reply.get("raw") is not None:
    sys.stdout.write(reply["raw"])
else:
    status = reply["status"]
    sys.stdout.write(f"HTTP/2.0 {status} {reply.get('reason', 'Fake')}\n")
    for k, v in reply["headers"].items():
        sys.stdout.write(f"{k}: {v}\r\n")
    sys.stdout.write("\r\n")
    sys.stdout.write(reply["body"])
if reply.get("stderr"):
    sys.stderr.write(reply["stderr"])
code = reply.get("exit")
if code is None:
    code = 1 if reply.get("raw") is None and reply["status"] >= 300 else 0
sys.exit(code)
'''


def reply(
    status: int = 200,
    json_body: Any = None,
    *,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
    exit: int | None = None,
    stderr: str | None = None,
    raw: str | None = None,
    sleep: float | None = None,
) -> dict[str, Any]:
    """One canned answer. ``raw`` replaces the whole stdout (no status line printed);
    ``exit`` overrides gh's exit rule (1 for a status of 300 or more); ``sleep`` makes
    gh hang that many seconds before answering."""
    text = body if body is not None else json.dumps(json_body if json_body is not None else {})
    return {"status": status, "headers": dict(headers or {}), "body": text,
            "exit": exit, "stderr": stderr, "raw": raw, "sleep": sleep}


class FakeGh:
    """Handle on one fake ``gh``: add routes, read the calls it received."""

    reply = staticmethod(reply)

    def __init__(self, root: Path) -> None:
        self.bin_dir = root / "bin"
        self.state_dir = root / "state"
        self.bin_dir.mkdir(parents=True)
        self.state_dir.mkdir(parents=True)
        script = self.bin_dir / "gh"
        script.write_text(_SCRIPT.replace("__PYTHON__", sys.executable))
        script.chmod(0o755)
        self._routes: list[dict[str, Any]] = []
        self._save()
        self.env = {
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKE_GH_DIR": str(self.state_dir),
            "HOME": str(root),
        }

    def route(self, path: str, *replies: dict[str, Any], method: str = "GET",
              query: Mapping[str, str] | None = None) -> None:
        """Answer ``method path`` (query items in ``query`` must match) with ``replies``."""
        self._routes.append({"method": method, "path": path.lstrip("/"),
                             "query": dict(query or {}), "replies": list(replies)})
        self._save()

    def calls(self) -> list[dict[str, Any]]:
        log = self.state_dir / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def clear_calls(self) -> None:
        (self.state_dir / "calls.jsonl").unlink(missing_ok=True)

    def _save(self) -> None:
        (self.state_dir / "routes.json").write_text(json.dumps(self._routes))


@pytest.fixture
def fake_gh(tmp_path: Path) -> FakeGh:
    return FakeGh(tmp_path / "fake-gh")


# What GitHub says when a secondary rate limit is hit (no Retry-After, no remaining=0).
SECONDARY_RATE_LIMIT = ("You have exceeded a secondary rate limit. Please wait a few minutes "
                        "before you try again.")
API_HOST = "http://api.github.localhost"


class FakeGitHub:
    """A plain-HTTP stand-in for api.github.com, with canned replies per path.

    Replies are looked up by the path with its query (in gh's order), then the path
    alone, then the longest matching prefix (:meth:`fail_repo`, :meth:`hang`). The
    faults real deployments meet: a status for every path of one repository
    (:meth:`fail_repo`), an answer that never comes (:meth:`hang`), a ``301`` to
    another place (:meth:`redirect`), and a secondary rate limit
    (:meth:`secondary_rate_limit`).
    """

    def __init__(self) -> None:
        self.routes: dict[str, list[tuple[int, dict[str, str], Any]]] = {}
        self.prefixes: dict[str, tuple[int, dict[str, str], Any]] = {}
        self.hung: set[str] = set()
        self.released = threading.Event()
        self.config_dir = Path()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        handler = self._handler()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def route(self, path: str, status: int = 200, body: Any = None,
              headers: Mapping[str, str] | None = None) -> None:
        """Answer ``path`` (with its query string, in gh's order) with one more reply;
        ``body`` is sent as JSON, or as it is when it is ``bytes``."""
        self.routes.setdefault(path, []).append((status, dict(headers or {}), body))

    def fail_repo(self, repo: str, status: int, message: str = "") -> None:
        """Answer every request about ``repo`` (``owner/name``) with ``status``."""
        text = message or {404: "Not Found", 500: "Server Error"}.get(status, "Failed")
        self.prefixes[f"/repos/{repo}"] = (status, {}, {"message": text})

    def hang(self, prefix: str = "/") -> None:
        """Never answer a request whose path starts with ``prefix`` (until teardown)."""
        self.hung.add(prefix)

    def redirect(self, path: str, to: str) -> None:
        """Answer ``path`` with ``301 Moved Permanently`` to ``to`` (a path), as GitHub
        does for a renamed repository or a transferred issue; gh follows it."""
        self.route(path, 301, {"message": "Moved Permanently", "url": f"{API_HOST}{to}"},
                   {"Location": f"{API_HOST}{to}"})

    def secondary_rate_limit(self, path: str) -> None:
        """Answer ``path`` with GitHub's secondary rate limit: a 403 with neither
        ``Retry-After`` nor ``X-RateLimit-Remaining: 0``."""
        self.route(path, 403, {"message": SECONDARY_RATE_LIMIT,
                               "documentation_url": "https://docs.github.com/rest"})

    def paths(self) -> list[str]:
        """The paths requested so far, in order."""
        with self._lock:
            return [r["path"] for r in self.requests]

    def env(self) -> dict[str, str]:
        """The environment for the real gh: this server as github.localhost's API."""
        config_dir = self.config_dir
        proxy = f"http://127.0.0.1:{self.port}"
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(config_dir),
            "GH_CONFIG_DIR": str(config_dir),
            "GH_HOST": "github.localhost",
            "GH_TOKEN": "test-token-not-real",
            "HTTP_PROXY": proxy,
            "http_proxy": proxy,
            "NO_PROXY": "",
            "no_proxy": "",
        }

    def _reply(self, path: str, key: str) -> tuple[int, dict[str, str], Any] | None:
        """The reply for a request, or ``None`` when it hangs. Called under the lock."""
        if any(path.startswith(prefix) for prefix in self.hung):
            return None
        replies = self.routes.get(key) or self.routes.get(path)
        if replies:
            return replies[0] if len(replies) == 1 else replies.pop(0)
        for prefix in sorted(self.prefixes, key=len, reverse=True):
            if path == prefix or path.startswith(f"{prefix}/"):
                return self.prefixes[prefix]
        return 404, {}, {"message": "Not Found"}

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                key = parts.path + (f"?{parts.query}" if parts.query else "")
                with fake._lock:
                    fake.requests.append({"host": self.headers.get("Host"), "path": parts.path,
                                          "query": dict(parse_qsl(parts.query)),
                                          "authorization": self.headers.get("Authorization")})
                    found = fake._reply(parts.path, key)
                if found is None:
                    fake.released.wait(120)
                    self.close_connection = True
                    return
                status, headers, body = found
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    server.thread.start()
    server.config_dir = tmp_path / "gh-config"
    server.config_dir.mkdir()
    try:
        yield server
    finally:
        server.released.set()  # let hung requests end, so the server can stop
        server.server.shutdown()
        server.server.server_close()
