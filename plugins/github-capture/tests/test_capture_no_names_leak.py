"""No event, log line or telemetry attribute names a repository or a path."""

from __future__ import annotations

import json
import logging

import msgspec
import tenacity
from hostcore_gh.runner import GhRunner

OWNER, REPOS = "zzowner", ["zzalpha", "zzbeta", "zzgamma", "zzdelta", "zzgone", "zzdown"]
DIRECTORIES = ["/srv/zzwork/zzproject", "/srv/zzwork/zzsecret"]
NEEDLES = [OWNER, *REPOS, "zzwork", "zzproject", "zzsecret", "gitlab"]


def test_no_event_or_log_line_names_a_repository_or_a_path(harness, fake_gh, make_events,
                                                           clock, caplog):
    caplog.set_level(logging.DEBUG)
    for n, name in enumerate(REPOS[:4]):
        fake_gh.repo(f"{OWNER}/{name}", make_events(f"{OWNER}/{name}", 120, first_id=1000 * n))
    fake_gh.unreachable(f"{OWNER}/zzdown")
    h = harness(row_budget=3, tuple_budget=3, request_budget=4,
                runner=GhRunner(env=fake_gh.env, wait=tenacity.wait_none(), attempts=1))
    for directory in DIRECTORIES:
        h.add("claude", [(directory, "claude", f"git@github.com:{OWNER}/{r}.git") for r in REPOS])
    h.add("claude", [(DIRECTORIES[0], "claude", "https://gitlab.com/zzowner/zzother")])
    for _ in range(6):
        h.host.tick()
        clock.advance(61)
    h.add("codex", [(DIRECTORIES[0], "codex", f"https://github.com/{OWNER}/zzepsilon")])
    h.host.tick()
    h.local_only(DIRECTORIES[1])
    h.host.store.purge(directory=DIRECTORIES[0] + "/nothing-here")
    fake_gh.rate_limit(int(clock.now) + 100, retry_after=5)
    for _ in range(4):
        h.host.tick()
        clock.advance(61)
    # The pass the policy change started swaps first (withheld tuples are charged to
    # its budget too, so it takes a tick per window), or it would swap the future
    # stamp below away.
    while h.state().revalidation is not None:
        h.host.tick()
        clock.advance(61)
    fake_gh.rate_limit(None)
    broken = GhRunner(env={"PATH": "/nonexistent"}, wait=tenacity.wait_none())
    h.worker.capturer.runner = broken
    # Stamped a month ahead by a wrong clock: due now, and counted.
    h.sidecar.state.save(msgspec.structs.replace(h.state(), derived_at=clock.now + 30 * 86400))
    for _ in range(3):
        h.host.tick()
        clock.advance(61)

    names = set(h.events.names())
    # The scenario really went through every event and failure path.
    assert {"capture.revalidation_started", "capture.revalidation_slice",
            "capture.revalidation_completed", "capture.inventory_extended",
            "capture.polled", "capture.future_stamps"} <= names
    polls = [e.attributes for e in h.events.named("capture.polled")]
    assert any(p["failed"] for p in polls) and any(p["gone"] for p in polls)
    assert any(p["rate_limited"] for p in polls) and any(p["unavailable"] for p in polls)
    assert any(p["budget_exhausted"] for p in polls)

    texts = [json.dumps({"name": e.name, "attributes": e.attributes}) for e in h.events.events]
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.args) for record in caplog.records]
    assert caplog.records, "the scenario should have logged its failures"
    leaks = [t for t in texts for needle in NEEDLES if needle in t.lower()]
    assert leaks == []
