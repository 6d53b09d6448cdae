"""A fake GitHub repository-events API, shared by the fake ``gh`` and the local server.

The world lives in a JSON file (``world.json`` in ``FAKE_GH_DIR``), so the fake
``gh`` — a separate process per call — and the HTTP server answer from the same
state, and a test changes it between ticks:

``{"repos": {"owner/repo": {"events": [newest first...], "poll_interval": 60,
"status": 200}}, "rate_limit": null | {"reset": epoch, "retry_after": seconds}}``

Behaviour modelled on GitHub's: ``ETag`` derived from the event ids, 304 when
``If-None-Match`` matches, ``per_page``/``page`` paging with a ``Link`` header,
at most 300 events kept, ``X-Poll-Interval``, 403 with ``x-ratelimit-*`` while
rate limited. Every request is appended to ``calls.jsonl``. A path listed in
``"unreachable"`` gets no HTTP response from the fake ``gh`` (a network failure).

Run as a script, it is ``gh``: it understands ``gh api -i -X METHOD PATH -H ...``
and ``gh --version``, prints the status line and headers like ``gh api -i`` and
exits 1 for a status of 300 or more, as gh does.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

KEPT_EVENTS = 300


def etag_of(events: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(",".join(str(e["id"]) for e in events).encode()).hexdigest()
    return f'W/"{digest[:20]}"'


def answer(world: dict[str, Any], method: str, path: str, query: dict[str, str],
           headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body) for one request against ``world``."""
    limit = world.get("rate_limit")
    if limit:
        found = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(limit["reset"])}
        if limit.get("retry_after") is not None:
            found["retry-after"] = str(limit["retry_after"])
        return 403, found, {"message": "API rate limit exceeded"}
    parts = path.strip("/").split("/")
    if method != "GET" or len(parts) != 4 or parts[0] != "repos" or parts[3] != "events":
        return 404, {}, {"message": "Not Found"}
    repo = world.get("repos", {}).get(f"{parts[1]}/{parts[2]}".lower())
    if repo is None:
        return 404, {}, {"message": "Not Found"}
    if repo.get("status", 200) != 200:
        return repo["status"], {}, {"message": "Unavailable"}
    events = repo["events"][:KEPT_EVENTS]
    per_page = int(query.get("per_page", "30"))
    page = int(query.get("page", "1"))
    chunk = events[(page - 1) * per_page: page * per_page]
    tag = etag_of(chunk)
    common = {"x-poll-interval": str(repo.get("poll_interval", 60)),
              "x-ratelimit-remaining": str(world.get("remaining", 4999)),
              "x-ratelimit-reset": "1900000000", "etag": tag}
    if headers.get("if-none-match") == tag:
        return 304, common, None
    if page * per_page < len(events):
        base = f"https://api.github.com/{path.strip('/')}"
        common["link"] = (f'<{base}?per_page={per_page}&page={page + 1}>; rel="next", '
                          f'<{base}?per_page={per_page}&page={-(-len(events) // per_page)}>; '
                          'rel="last"')
    return 200, common, chunk


def load_world(state_dir: Path) -> dict[str, Any]:
    return json.loads((state_dir / "world.json").read_text())


def log_call(state_dir: Path, method: str, path: str, query: dict[str, str],
             headers: dict[str, str], status: int) -> None:
    with open(state_dir / "calls.jsonl", "a") as handle:
        handle.write(json.dumps({"method": method, "path": path.strip("/"), "query": query,
                                 "if_none_match": headers.get("if-none-match"),
                                 "status": status}) + "\n")


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print("gh version 2.99.0 (fake, capture tests)")
        return 0
    state_dir = Path(os.environ["FAKE_GH_DIR"])
    method, headers, target = "GET", {}, ""
    rest = argv[1:] if argv[:1] == ["api"] else []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "-i":
            i += 1
        elif arg == "-X":
            method, i = rest[i + 1], i + 2
        elif arg == "-H":
            name, _, value = rest[i + 1].partition(":")
            headers[name.strip().lower()] = value.strip()
            i += 2
        else:
            target, i = arg, i + 1
    parts = urlsplit(target)
    query = dict(parse_qsl(parts.query))
    world = load_world(state_dir)
    if parts.path.strip("/") in world.get("unreachable", []):
        # No HTTP response at all, as when the network is down; gh names the URL.
        log_call(state_dir, method, parts.path, query, headers, 0)
        sys.stderr.write(f"error connecting to api.github.com/{parts.path.strip('/')}\n")
        return 1
    status, reply_headers, body = answer(world, method, parts.path, query, headers)
    log_call(state_dir, method, parts.path, query, headers, status)
    out = sys.stdout
    out.write(f"HTTP/2.0 {status} Fake\n")
    for name, value in reply_headers.items():
        out.write(f"{name}: {value}\r\n")
    out.write("\r\n")
    if body is not None:
        out.write(json.dumps(body))
    return 1 if status >= 300 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
