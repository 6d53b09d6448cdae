"""Capture: poll each repository's events through ``gh`` and store each event once.

For every repository capture may poll (see :meth:`Sidecar.capture_set`) whose
poll interval has passed, least recently polled first:

* ``GET repos/{owner}/{repo}/events`` through :class:`hostcore_gh.runner.GhRunner`,
  with ``If-None-Match`` when an ETag is known. A 304 (which costs no rate limit)
  means nothing new.
* Otherwise page through at most :data:`MAX_EVENTS` events, newest first, until
  the newest event stored last time, and append them to the ``github_events``
  partition keyed by event id, so a re-fetched event is stored once. The ETag and
  newest id are kept only when the pages were read to that point; a poll cut
  short starts over next time, and the key makes that harmless.
* ``X-Poll-Interval`` sets when the repository is next due (at most
  :data:`LONGEST_POLL_DELAY` ahead).
* A rate-limited answer stops the step and no request is made until
  ``retry-after`` / ``x-ratelimit-reset`` has passed (at most
  :data:`MAX_BACKOFF_SECONDS` ahead).
* At most ``request_budget`` requests per step; the rest wait for the next.

A time in ``capture.json`` further ahead than the plugin ever schedules it was
written by a wrong clock (:mod:`hostcore_github_capture.stamps`): such a
repository is due now, such a backoff is over, and the step counts them in
``capture.future_stamps``. ETags and newest ids describe events stored in one
store file: when the store is replaced (its instance id changed) they are
forgotten, so the new store gets every event GitHub still keeps.

Nothing is logged or emitted with a repository name; errors are counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

import msgspec
from hostcore_gh.runner import GhAuthError, GhError, GhResponse, GhUnavailable

from hostcore.evidence.rows import EvidenceRow
from hostcore_github_capture.sidecar import CAPTURE_PARTITION
from hostcore_github_capture.stamps import ahead
from hostcore_github_capture.state import (
    MAX_BACKOFF_SECONDS,
    CaptureState,
    RepoPoll,
    StateFile,
)

log = logging.getLogger("hostcore_github_capture.capture")

# gh requests one capture step may make (each one is a gh subprocess).
CAPTURE_REQUEST_BUDGET = 100
# GitHub keeps at most this many events per repository.
MAX_EVENTS = 300
PER_PAGE = 100
# When GitHub sends no X-Poll-Interval (seconds).
DEFAULT_POLL_INTERVAL = 60.0
# After an answer that is neither events nor "not modified" (seconds).
FAILED_RETRY_SECONDS = 15 * 60.0
# After 404/410/451: the repository is gone or not visible to this login (seconds).
NOT_FOUND_RETRY_SECONDS = 6 * 3600.0
# The furthest ahead a repository is ever scheduled (an X-Poll-Interval is capped
# to it): a poll_after beyond it was written by a wrong clock.
LONGEST_POLL_DELAY = NOT_FOUND_RETRY_SECONDS
# A rate limit whose headers say nothing about when it lifts (seconds).
DEFAULT_BACKOFF_SECONDS = 60.0

SOURCE_ID = "github-capture"


class RunnerLike(Protocol):
    def api(self, path: str, *, method: str = "GET", headers: Any = ...,
            params: Any = None) -> GhResponse: ...


class StoreLike(Protocol):
    @property
    def instance_id(self) -> str: ...

    def append(self, rows: Any, *, source: str | None = None,
               cursor: str | None = None) -> int: ...


class CaptureOutcome(msgspec.Struct, kw_only=True):
    """What one capture step did (counts only)."""

    repositories: int = 0  # polled
    requests: int = 0
    not_modified: int = 0
    events_stored: int = 0
    failed: int = 0
    gone: int = 0
    ignored: int = 0
    rate_limited: bool = False
    budget_exhausted: bool = False
    unavailable: bool = False

    @property
    def pending(self) -> bool:
        """More repositories were due than the request budget allowed."""
        return self.budget_exhausted and not (self.rate_limited or self.unavailable)


class _RateLimited(Exception):
    def __init__(self, until: float) -> None:
        super().__init__("rate limited")
        self.until = until


class Capturer:
    """One capture step at a time, against ``capture.json`` and the store."""

    def __init__(
        self,
        runner: RunnerLike,
        store: StoreLike,
        state: StateFile[CaptureState],
        emit: Callable[..., object],
        *,
        clock: Callable[[], float] = time.time,
        request_budget: int = CAPTURE_REQUEST_BUDGET,
    ) -> None:
        self.runner = runner
        self.store = store
        self.state = state
        self.emit = emit
        self.clock = clock
        self.request_budget = request_budget
        # Set by _get when an answer used up the rate-limit window.
        self._exhausted_until: float | None = None

    def due(self, inventory: Collection[str]) -> list[str]:
        """Repositories whose poll interval has passed, least recently polled first.

        A repository whose times lie further ahead than the plugin schedules
        them (a wrong clock wrote them) is due, and counts as never polled.
        """
        state = self.state.load()
        now = self.clock()
        never = RepoPoll()
        polls = state.repos
        ready = [r for r in inventory if _ready(polls.get(r, never), now)]
        ready.sort(key=lambda r: (_polled_at(polls.get(r, never), now), r))
        return ready

    def step(self, inventory: Collection[str], *, ignored: int = 0,
             keep: Collection[str] = ()) -> CaptureOutcome:
        """Poll what is due among ``inventory``. Polling state is kept for
        ``inventory`` and ``keep``, and forgotten for every other repository."""
        loaded = self.state.load()
        state = self._for_this_store(loaded)
        now = self.clock()
        outcome = CaptureOutcome(ignored=ignored)
        # Retired repositories lose their polling state: bounded by the inventory.
        polls = {r: p for r, p in state.repos.items() if r in inventory or r in keep}
        self._count_future_stamps(polls.values(), now)
        backoff_until = state.backoff_until
        if ahead(backoff_until, now, horizon=MAX_BACKOFF_SECONDS):
            self.emit("capture.future_stamps", field="backoff_until", count=1)
            backoff_until = 0.0
        if now < backoff_until:
            outcome.rate_limited = True
        else:
            for repo in self.due(inventory):
                if outcome.requests >= self.request_budget:
                    outcome.budget_exhausted = True
                    break
                self._exhausted_until = None
                try:
                    polls[repo] = self._poll(repo, polls.get(repo, RepoPoll()), outcome, now)
                    if self._exhausted_until is not None:
                        raise _RateLimited(self._exhausted_until)
                except _RateLimited as limited:
                    outcome.rate_limited = True
                    backoff_until = limited.until
                    break
                except (GhUnavailable, GhAuthError) as exc:
                    # The exception text can name the repository: log its kind only.
                    # Once per state change: a user who never set gh up is told once.
                    if not loaded.gh_unavailable:
                        log.warning("capture stopped: gh cannot run or is not logged in "
                                    "(%s); said once until it works again",
                                    type(exc).__name__)
                    outcome.unavailable = True
                    break
                except GhError as exc:
                    log.info("a capture request failed (%s)", type(exc).__name__)
                    outcome.failed += 1
                    polls[repo] = _later(polls.get(repo, RepoPoll()), now, FAILED_RETRY_SECONDS)
        # A tick that asked nothing (nothing due, rate-limited) learnt nothing about gh.
        gh_unavailable = outcome.unavailable or (loaded.gh_unavailable
                                                 and not outcome.requests)
        if loaded.gh_unavailable and not gh_unavailable:
            log.warning("capture resumed: gh runs and is logged in again")
        if polls != loaded.repos or backoff_until != loaded.backoff_until \
                or state.store_instance != loaded.store_instance \
                or gh_unavailable != loaded.gh_unavailable:
            self.state.save(CaptureState(repos=polls, backoff_until=backoff_until,
                                         store_instance=state.store_instance,
                                         gh_unavailable=gh_unavailable))
        if outcome.requests or outcome.rate_limited or outcome.unavailable:
            self.emit("capture.polled", **msgspec.structs.asdict(outcome))
        return outcome

    def _for_this_store(self, state: CaptureState) -> CaptureState:
        """``state`` for the store in use: ETags and newest ids of another store
        file are forgotten (their events are not in this one); a state written
        before the store was noted adopts the one in use."""
        instance = self.store.instance_id
        if state.store_instance == instance:
            return state
        repos = state.repos
        if state.store_instance is not None:
            repos = {r: msgspec.structs.replace(p, etag=None, newest_id=None)
                     for r, p in repos.items()}
        return msgspec.structs.replace(state, repos=repos, store_instance=instance)

    def _count_future_stamps(self, polls: Collection[RepoPoll], now: float) -> None:
        # Compared as numbers first: this runs over every repository every step.
        latest = now + LONGEST_POLL_DELAY
        scheduled = sum(1 for poll in polls if poll.poll_after > latest
                        and ahead(poll.poll_after, now, horizon=LONGEST_POLL_DELAY))
        written = sum(1 for poll in polls if poll.polled_at > now
                      and ahead(poll.polled_at, now))
        if scheduled:
            self.emit("capture.future_stamps", field="poll_after", count=scheduled)
        if written:
            self.emit("capture.future_stamps", field="polled_at", count=written)

    def _poll(self, repo: str, poll: RepoPoll, outcome: CaptureOutcome, now: float) -> RepoPoll:
        headers = {"If-None-Match": poll.etag} if poll.etag else {}
        first = self._get(repo, 1, headers, outcome, now)
        outcome.repositories += 1
        interval = _poll_interval(first)
        if first.status == 304:
            outcome.not_modified += 1
            return msgspec.structs.replace(poll, poll_after=now + interval, polled_at=now)
        if first.status in (404, 410, 451):
            outcome.gone += 1
            return _later(poll, now, NOT_FOUND_RETRY_SECONDS)
        events = _events(first)
        if events is None:
            outcome.failed += 1
            return _later(poll, now, FAILED_RETRY_SECONDS)
        newest = _event_id(events[0]) if events else poll.newest_id
        fresh: list[dict[str, Any]] = []
        complete = self._collect(events, poll.newest_id, fresh)
        response, page = first, 1
        try:
            while complete is None:
                if outcome.requests >= self.request_budget:
                    outcome.budget_exhausted = True
                    break
                if not _has_next(response, events):
                    complete = True
                    break
                page += 1
                response = self._get(repo, page, {}, outcome, now)
                events = _events(response)
                if events is None:
                    outcome.failed += 1
                    break
                complete = self._collect(events, poll.newest_id, fresh)
        finally:
            # Pages already fetched are kept even when a later page fails.
            self._store(fresh, outcome)
        if complete:
            etag = first.headers.get("etag")
            return RepoPoll(etag=etag, newest_id=newest, poll_after=now + interval, polled_at=now)
        return msgspec.structs.replace(poll, poll_after=now + interval, polled_at=now)

    @staticmethod
    def _collect(events: list[dict[str, Any]], known: str | None,
                 fresh: list[dict[str, Any]]) -> bool | None:
        """Add events newer than ``known``; True when paging is done, None to go on."""
        for event in events:
            if known is not None and _event_id(event) == known:
                return True
            fresh.append(event)
            if len(fresh) >= MAX_EVENTS:
                return True
        return None

    def _get(self, repo: str, page: int, headers: dict[str, str], outcome: CaptureOutcome,
             now: float) -> GhResponse:
        params = {"per_page": str(PER_PAGE)}
        if page > 1:
            params["page"] = str(page)
        outcome.requests += 1
        response = self.runner.api(f"repos/{repo}/events", headers=headers, params=params)
        if response.rate_limited:
            raise _RateLimited(_reset_time(response, now))
        if response.ok and response.headers.get("x-ratelimit-remaining") == "0":
            # That was the last request the window allows: use it, then wait.
            self._exhausted_until = _reset_time(response, now)
        return response

    def _store(self, events: list[dict[str, Any]], outcome: CaptureOutcome) -> None:
        rows = [EvidenceRow(partition=CAPTURE_PARTITION, source_id=SOURCE_ID,
                            ts=str(event.get("created_at") or ""), payload=event,
                            key=_event_id(event))
                for event in events if _event_id(event) is not None]
        if rows:
            outcome.events_stored += self.store.append(rows)


def _events(response: GhResponse) -> list[dict[str, Any]] | None:
    """The events of a 200 answer, or ``None`` when it is not a list of events."""
    if not response.ok:
        return None
    try:
        data = response.json()
    except GhError:
        return None
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        return None
    return data


def _event_id(event: dict[str, Any]) -> str | None:
    value = event.get("id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        return None
    return str(value)


def _has_next(response: GhResponse, events: list[dict[str, Any]]) -> bool:
    """A full page, and GitHub's Link header (when sent) names a next one."""
    if len(events) < PER_PAGE:
        return False
    link = response.headers.get("link")
    return link is None or 'rel="next"' in link


def _reset_time(response: GhResponse, now: float) -> float:
    reset = response.rate_limit_reset(now)
    until = reset.timestamp() if reset is not None else now + DEFAULT_BACKOFF_SECONDS
    return min(until, now + MAX_BACKOFF_SECONDS)


def _poll_interval(response: GhResponse) -> float:
    value = response.headers.get("x-poll-interval", "").strip()
    if not value.isdigit():
        return DEFAULT_POLL_INTERVAL
    return float(min(max(1, int(value)), LONGEST_POLL_DELAY))


def _ready(poll: RepoPoll, now: float) -> bool:
    after = poll.poll_after
    return after <= now or (after > now + LONGEST_POLL_DELAY
                            and ahead(after, now, horizon=LONGEST_POLL_DELAY))


def _polled_at(poll: RepoPoll, now: float) -> float:
    """When ``poll`` was last polled, for ordering: a time in the future counts as never."""
    return 0.0 if ahead(poll.polled_at, now) else poll.polled_at


def _later(poll: RepoPoll, now: float, delay: float) -> RepoPoll:
    return msgspec.structs.replace(poll, poll_after=now + delay, polled_at=now)
