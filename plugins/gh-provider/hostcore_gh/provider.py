"""The ``gh`` work-item provider: GitHub issues and pull requests of configured repos.

Refs are ``owner/repo#123`` with ``owner/repo`` in lower case (GitHub names are
case-insensitive, a ledger key must not be). A scope is one ``owner/repo``.

Listing uses the REST issues endpoint (pull requests included) with
``state=open&per_page=100&sort=updated&direction=desc`` and walks every page: the
next page is asked for while the ``Link`` header names one (or, without a
``Link`` header, while a page comes back full). With ``labels`` configured, each
label is listed on its own and the results are merged, so an item carrying any of
them is listed. A scope is:

* ``complete`` when every page of every label came back;
* ``degraded`` when GitHub rate-limited a request, or asked earlier not to be
  asked until a time not yet come (see below);
* ``interrupted`` when the page budget or the poll cycle's time budget ran out,
  or a stop was requested, with pages left. The items listed so far are kept,
  and since pages come most recently changed first, ``changed_since`` names the
  change time after which the listing is complete (the poller reconciles what
  that proves). Stopped by the page budget alone, the scope is ``capped``: too
  big to list whole by design, reported but not a failure of the cycle;
* ``failed`` on anything else (no answer in time, auth, not found, a body that is
  not a list of issues).

A scope that stops part way keeps the items of the pages that came back: they are
open, and announcing them does not wait for the rest.

**Time.** Every request ends within :data:`QUESTION_DEADLINE_SECONDS` or the poll
cycle's budget, whichever comes first (:mod:`hostcore.workitems.budget`); a stop
request kills the running ``gh``. A closure question that gets no answer in time
degrades its scope for the rest of the cycle.

**Rate limits** follow GitHub's rules (``retry-after``; else ``x-ratelimit-reset``
when no request is left; else at least a minute). GitHub counts them per account,
so after one the provider asks nothing, in any scope, until that time, which it
keeps in ``<root>/plugins/gh/rate-limit.json`` so that ``poll --once`` from cron
honours it too.

**Moves.** An answer about another repository or number than the question (GitHub
followed a transfer's or a rename's redirect) is a ``moved`` closure naming the
new ref. :meth:`GhProvider.relocate` tells the poller when a repository that is
no longer configured now answers under a configured name (a rename).

**Numbers.** An issue number is 1 to :data:`MAX_ISSUE_NUMBER`, both when listed
and when asked: a listing with another number is not a list of issues.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from hostcore.errors import ConfigError
from hostcore.files import atomic_write
from hostcore.timestamps import format_utc, is_future, parse_exact, utc_now
from hostcore.workitems.budget import CycleBudget, current
from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    ScopeStatus,
    WorkItem,
    WorkItemRef,
)
from hostcore_gh.runner import (
    GhCancelled,
    GhError,
    GhResponse,
    GhRunner,
    GhTimeout,
    GhTransportError,
)

log = logging.getLogger("hostcore_gh.provider")

# At most this many pages (of PER_PAGE items) per label per repository per cycle.
LISTING_MAX_PAGES = 50
PER_PAGE = 100
# One request (gh's retries included) ends within this many seconds, or sooner when the
# poll cycle's budget runs out first.
QUESTION_DEADLINE_SECONDS = 20.0
# The largest issue number a ref may carry (GitHub's are 64-bit integers).
MAX_ISSUE_NUMBER = 2**63 - 1
# A rate-limit wait read back from the file further ahead than this was kept by a
# clock that ran ahead: ignored.
RATE_LIMIT_WAIT_BELIEVED = timedelta(hours=2)
RATE_LIMIT_FILE = "rate-limit.json"

_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_REPO = r"[A-Za-z0-9._-]{1,100}"
# Patterns kept as text: re compiles each on first use and caches it, so a start
# that asks GitHub nothing pays nothing for them.
_SCOPE_RE = rf"({_OWNER})/({_REPO})"
_REF_RE = rf"({_OWNER})/({_REPO})#([1-9][0-9]{{0,18}})"
_NEXT_RE = r'<[^>]*>\s*;\s*rel="?next"?'
_API_REPO_RE = r"/repos/([^/?#]+)/([^/?#]+)/?$"
_HTML_REPO_RE = r"^https?://[^/]+/([^/?#]+)/([^/?#]+)/(?:issues|pull)/[0-9]+/?$"
_LOGIN_HINT = "run `gh auth login` (or set GH_TOKEN) with access to it"


class GhConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.gh]`` in ``hostcore.toml``."""

    repos: list[str] = []
    labels: list[str] = []


class RateLimitWait(msgspec.Struct):
    """``rate-limit.json``: GitHub asked not to be asked before ``until``."""

    until: str


def parse_scope(text: str) -> str:
    """``owner/repo`` lower-cased; :class:`ValueError` naming ``text`` otherwise."""
    match = re.fullmatch(_SCOPE_RE, text)
    if match is None or match.group(2) in (".", ".."):
        raise ValueError(f"{text!r} is not an owner/repo name")
    return text.lower()


def check_config(config: GhConfig, origin: str) -> GhConfig:
    """Refuse a repo that is not ``owner/repo`` or an empty label, naming the key."""
    for index, repo in enumerate(config.repos):
        try:
            parse_scope(repo)
        except ValueError as exc:
            raise ConfigError(f"{origin}: [plugins.gh] repos[{index}]: {exc}") from None
    for index, label in enumerate(config.labels):
        if not label.strip():
            raise ConfigError(f"{origin}: [plugins.gh] labels[{index}]: a label is not empty")
    return config


class GhProvider:
    """Work items of ``config.repos`` carrying any of ``config.labels`` (all open
    items when no label is configured), asked through ``runner``.

    :param max_pages: the page budget per label per repository.
    :param question_deadline: seconds one request may take (tests inject short ones).
    :param state_dir: where the rate-limit wait is kept (``None``: in memory only).
    :param clock: the current time (UTC), for rate-limit waits.
    """

    name = "gh"

    def __init__(self, config: GhConfig, runner: GhRunner, *,
                 max_pages: int = LISTING_MAX_PAGES,
                 question_deadline: float = QUESTION_DEADLINE_SECONDS,
                 state_dir: Path | None = None,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.scopes = sorted({parse_scope(repo) for repo in config.repos})
        self.labels = sorted(set(config.labels))
        self.runner = runner
        self.max_pages = max_pages
        self.question_deadline = question_deadline
        self.state_dir = state_dir
        self.clock = clock
        self._wait_until: datetime | None = None
        self._wait_loaded = state_dir is None

    # -- registration contract -------------------------------------------------------

    def configured(self) -> bool:
        """Whether any repository is configured (unconfigured is normal, not a failure)."""
        return bool(self.scopes)

    def availability(self) -> str | None:
        if not self.scopes:
            return "no repository to poll: set repos = [\"owner/repo\"] under [plugins.gh]"
        return self.runner.availability()

    def status(self) -> dict[str, Any]:
        report: dict[str, Any] = {"configured": self.configured(), "repos": len(self.scopes),
                                  "labels": len(self.labels), "gh_runs": self.runner.runs}
        waiting = self._rate_limited_until()
        if waiting:
            report["rate_limited_until"] = waiting
        return report

    def owns(self, ref: WorkItemRef) -> bool:
        parsed = _parse_ref(ref.ref)
        return parsed is not None and parsed[0] in self.scopes

    def scope_of(self, ref: WorkItemRef) -> str:
        parsed = _parse_ref(ref.ref)
        if parsed is None:
            raise ValueError(f"{ref.ref!r} is not an owner/repo#number ref")
        return parsed[0]

    # -- listing -----------------------------------------------------------------

    def list_items(self) -> Listing:
        return Listing(tuple(self._list_scope(scope) for scope in self.scopes))

    def _list_scope(self, scope: str) -> ScopeListing:
        items: dict[int, WorkItem] = {}
        stopped: list[_ScopeStop] = []
        labels: list[str | None] = list(self.labels) or [None]
        for label in labels:
            try:
                self._list_label(scope, label, items)
            except _ScopeStop as stop:
                if stop.status != "interrupted":
                    return ScopeListing(scope=scope, status=stop.status, reason=stop.reason,
                                        reset_at=stop.reset_at,
                                        items=tuple(items[n] for n in sorted(items)))
                stopped.append(stop)
        ordered = tuple(items[number] for number in sorted(items))
        if not stopped:
            return ScopeListing(scope=scope, status="complete", items=ordered)
        markers = [stop.marker for stop in stopped]
        since = max(markers) if all(markers) else ""
        proves = (f"records last changed after {since} are reconciled, the others wait for "
                  "a complete listing" if since else
                  "its records wait for a complete listing")
        return ScopeListing(scope=scope, status="interrupted", items=ordered,
                            reason=f"{stopped[0].reason}; {proves}", changed_since=since,
                            capped=all(stop.capped for stop in stopped))

    def _list_label(self, scope: str, label: str | None, items: dict[int, WorkItem]) -> None:
        """Add the open items of ``scope`` carrying ``label`` (any, for ``None``) to
        ``items``; raises :class:`_ScopeStop` when the listing cannot finish."""
        for issues in self._pages(scope, label):
            for issue in issues:
                items.setdefault(issue["number"], self._item(scope, issue))

    def _pages(self, scope: str, label: str | None) -> Iterator[list[dict[str, Any]]]:
        """Each page of open issues, most recently changed first, until the last one.

        Raises :class:`_ScopeStop`; an interrupted one carries the change time of the
        last item yielded (``""`` when none, or when it is not a seconds timestamp),
        after which what was yielded is complete.
        """
        params = {"state": "open", "per_page": str(PER_PAGE), "sort": "updated",
                  "direction": "desc"}
        if label is not None:
            params["labels"] = label
        marker = ""
        for page in range(1, self.max_pages + 1):
            response = self._ask(f"repos/{scope}/issues", {**params, "page": str(page)},
                                 what=f"{scope} (page {page})", scope=scope, marker=marker)
            if not response.ok:
                raise _ScopeStop("failed", f"{_describe(response)} listing {scope}")
            try:
                issues = response.json()
            except GhError as exc:
                raise _ScopeStop("failed", f"listing {scope} page {page}: {exc}") from None
            if not isinstance(issues, list) or not all(_is_issue(i) for i in issues):
                raise _ScopeStop("failed", f"listing {scope} page {page}: the answer is not "
                                           "a list of issues")
            yield issues
            if issues:
                last = issues[-1].get("updated_at")
                marker = last if isinstance(last, str) and parse_exact(last) else ""
            link = response.headers.get("link")
            if not (bool(re.search(_NEXT_RE, link)) if link is not None
                    else len(issues) >= PER_PAGE):
                return
        raise _ScopeStop("interrupted", f"listing {scope} stopped after {self.max_pages} "
                                        "pages with more to come", marker=marker, capped=True)

    def _ask(self, path: str, params: dict[str, str], *, what: str, scope: str,
             marker: str) -> GhResponse:
        """One listing request within the cycle's budget; a rate limit stops the scope
        as degraded, the end of the budget or a stop request as interrupted."""
        waiting = self._rate_limited_until()
        if waiting:
            raise _ScopeStop("degraded", f"GitHub asked to wait until {waiting} (rate limit); "
                                         f"{scope} was not asked", reset_at=waiting)
        budget = current()
        if budget is not None and budget.spent():
            raise _ScopeStop("interrupted", f"listing {scope} stopped: {_why_spent(budget)}",
                             marker=marker)
        try:
            response = self.runner.api(
                path, params=params,
                deadline=self._deadline(budget),
                cancel=budget.stop if budget else None)
        except GhCancelled:
            raise _ScopeStop("interrupted", f"listing {scope} stopped: a stop was requested",
                             marker=marker) from None
        except GhTimeout as exc:
            if budget is not None and budget.spent():
                raise _ScopeStop("interrupted", f"listing {scope} stopped: "
                                                f"{_why_spent(budget)}", marker=marker) from None
            raise _ScopeStop("failed", f"{what}: {exc}") from None
        except GhError as exc:
            raise _ScopeStop("failed", f"{what}: {exc}") from None
        if response.rate_limited:
            until = self._note_rate_limit(response)
            raise _ScopeStop("degraded", f"GitHub rate limit reached for {scope}; nothing is "
                                         f"asked until {until}", reset_at=until)
        return response

    def _deadline(self, budget: CycleBudget | None) -> float:
        """When one request must be over: :attr:`question_deadline` from now, or the
        end of the poll cycle's budget when that comes first."""
        if budget is None:
            return time.monotonic() + self.question_deadline
        return budget.deadline_for(self.question_deadline)

    @staticmethod
    def _item(scope: str, issue: dict[str, Any]) -> WorkItem:
        labels = tuple(str(label.get("name", "")) for label in issue.get("labels") or ()
                       if isinstance(label, dict))
        return WorkItem(
            ref=WorkItemRef(f"{scope}#{issue['number']}"),
            kind="pull_request" if isinstance(issue.get("pull_request"), dict) else "issue",
            title=str(issue.get("title") or ""),
            url=str(issue.get("html_url") or ""),
            updated_at=str(issue.get("updated_at") or ""),
            labels=labels,
        )

    # -- closure -----------------------------------------------------------------

    def closure(self, ref: WorkItemRef) -> Closure:
        """Closed, merged (a pull request), moved (the answer is about another
        repository: GitHub followed a transfer or a rename) or still open, with
        GitHub's state_reason.

        Raises :class:`ProviderError` naming the ref when GitHub cannot answer:
        not found (``gone``; ``final`` for a 410, a deleted issue), not authorised,
        rate-limited or no answer in time (both degrade the scope for the rest of
        the cycle), an answer that is not an issue or is about another number of
        the same repository.
        """
        parsed = _parse_ref(ref.ref)
        if parsed is None or parsed[0] not in self.scopes:
            raise ProviderError(f"{ref.ref!r} is not an issue of a configured repository",
                                ref=ref.ref)
        scope, number = parsed
        issue = self._answer(f"repos/{scope}/issues/{number}", ref.ref, scope, ref=ref.ref)
        moved_to = self._moved_to(issue, scope, number, ref.ref)
        if moved_to is not None:
            return Closure(state="moved", moved_to=moved_to)
        state = issue.get("state")
        if state == "open":
            return Closure(state="open")
        if state != "closed":
            raise ProviderError(f"{ref.ref}: GitHub answered with state {state!r}",
                                ref=ref.ref, scope=scope)
        closed_by = issue.get("closed_by")
        closure = Closure(
            state="closed",
            state_reason=str(issue.get("state_reason") or ""),
            closed_at=str(issue.get("closed_at") or ""),
            closed_by=str(closed_by.get("login", "")) if isinstance(closed_by, dict) else "",
        )
        pull = issue.get("pull_request")
        if isinstance(pull, dict):
            merged = pull.get("merged_at") if "merged_at" in pull else \
                self._answer(f"repos/{scope}/pulls/{number}", ref.ref, scope, ref=ref.ref) \
                .get("merged_at")
            if merged:
                return msgspec.structs.replace(closure, state="merged")
        return closure

    @staticmethod
    def _moved_to(issue: dict[str, Any], scope: str, number: int, ref: str) -> str | None:
        """The ref the answer is about when it is not the one asked (``None`` when it
        is); :class:`ProviderError` when it cannot be an answer to the question."""
        answered = issue.get("number")
        if not _valid_number(answered):
            raise ProviderError(f"{ref}: GitHub's answer is not an issue (no number)",
                                ref=ref, scope=scope)
        where = _repository_of(issue)
        if where is None or where == scope:
            if answered != number:
                raise ProviderError(f"{ref}: GitHub answered about #{answered}, not #{number}",
                                    ref=ref, scope=scope)
            return None
        return f"{where}#{answered}"

    def relocate(self, scope: str, refs: Sequence[WorkItemRef]) -> dict[str, str]:
        """Where the items ``refs`` of ``scope``, a repository no longer configured,
        live now: ``{old ref: new ref}`` when GitHub redirects the old name to a
        configured repository (it was renamed); ``{}`` when it does not (gone, or
        another repository). Raises :class:`ProviderError` when GitHub cannot say."""
        try:
            old = parse_scope(scope)
        except ValueError:
            return {}
        try:
            name = self._answer(f"repos/{old}", old, old).get("full_name")
        except _NotFound:
            return {}
        try:
            new = parse_scope(name) if isinstance(name, str) else None
        except ValueError:
            new = None
        if new is None or new == old or new not in self.scopes:
            return {}
        moves = {}
        for ref in refs:
            parsed = _parse_ref(ref.ref)
            if parsed is not None and parsed[0] == old:
                moves[ref.ref] = f"{new}#{parsed[1]}"
        return moves

    def _answer(self, path: str, what: str, scope: str,
                ref: str | None = None) -> dict[str, Any]:
        """GitHub's JSON object at ``path``, else :class:`ProviderError` naming
        ``what`` (:class:`_NotFound` for 404, 410 and 451)."""
        waiting = self._rate_limited_until()
        if waiting:
            raise ProviderError(f"{what}: GitHub asked to wait until {waiting} (rate limit)",
                                ref=ref, scope=scope, degrades_scope=True, reset_at=waiting)
        budget = current()
        try:
            response = self.runner.api(
                path, deadline=self._deadline(budget),
                cancel=budget.stop if budget else None)
        except (GhTransportError, GhCancelled) as exc:
            # No answer (in time): asking this scope again this cycle would cost as much.
            raise ProviderError(f"{what}: {exc}", ref=ref, scope=scope,
                                degrades_scope=True) from None
        except GhError as exc:
            raise ProviderError(f"{what}: {exc}", ref=ref, scope=scope) from None
        if response.rate_limited:
            until = self._note_rate_limit(response)
            raise ProviderError(f"{what}: GitHub rate limit reached; nothing is asked until "
                                f"{until}", ref=ref, scope=scope, degrades_scope=True,
                                reset_at=until)
        if response.status in (404, 410, 451):
            raise _NotFound(f"{what}: not found on GitHub (HTTP {response.status})",
                            ref=ref, scope=scope, gone=True, final=response.status == 410)
        if not response.ok:
            raise ProviderError(f"{what}: {_describe(response)}", ref=ref, scope=scope)
        try:
            body = response.json()
        except GhError as exc:
            raise ProviderError(f"{what}: {exc}", ref=ref, scope=scope) from None
        if not isinstance(body, dict):
            raise ProviderError(f"{what}: GitHub's answer is not an object", ref=ref,
                                scope=scope)
        return body

    # -- rate-limit waits ----------------------------------------------------------

    def _rate_limited_until(self) -> str:
        """When GitHub said it may be asked again, if that is still ahead; else ``""``."""
        if not self._wait_loaded:
            self._wait_loaded = True
            self._wait_until = self._load_wait()
        until = self._wait_until
        return format_utc(until) if until is not None and until > self.clock() else ""

    def _note_rate_limit(self, response: GhResponse) -> str:
        """Keep GitHub's wait (in memory, and on disk for the next process)."""
        self._wait_loaded = True
        self._wait_until = response.retry_at(self.clock())
        until = format_utc(self._wait_until)
        if self.state_dir is not None:
            try:
                atomic_write(self.state_dir / RATE_LIMIT_FILE,
                             msgspec.json.encode(RateLimitWait(until=until)), durable=False)
            except OSError as exc:  # the wait still holds for this process
                log.warning("could not keep the rate-limit wait (%s)", type(exc).__name__)
        return until

    def _load_wait(self) -> datetime | None:
        assert self.state_dir is not None  # loaded only when there is a folder
        try:
            kept = msgspec.json.decode((self.state_dir / RATE_LIMIT_FILE).read_bytes(),
                                       type=RateLimitWait)
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError) as exc:  # disposable: read as no wait
            log.debug("rate-limit file unreadable: %s", exc)
            return None
        until = parse_exact(kept.until)
        if until is not None and is_future(until, now=self.clock(),
                                           tolerance=RATE_LIMIT_WAIT_BELIEVED):
            return None  # kept by a clock that ran ahead: not a wait GitHub asked for
        return until


class _NotFound(ProviderError):
    """GitHub answered 404, 410 or 451: the item is gone (for good on a 410, which
    GitHub answers for a deleted issue)."""


class _ScopeStop(Exception):
    """Listing of one scope ends early with this status.

    ``marker`` (interrupted only) is the change time of the last item listed
    before the stop: the listing is complete for items changed after it.
    """

    def __init__(self, status: ScopeStatus, reason: str, *, reset_at: str = "",
                 marker: str = "", capped: bool = False) -> None:
        super().__init__(reason)
        self.status: ScopeStatus = status
        self.reason = reason
        self.reset_at = reset_at
        self.marker = marker
        self.capped = capped  # stopped by the page budget, not by time or a stop


def _why_spent(budget: CycleBudget) -> str:
    return ("a stop was requested" if budget.stopped()
            else "the poll cycle's time budget was spent")


def _parse_ref(text: str) -> tuple[str, int] | None:
    match = re.fullmatch(_REF_RE, text)
    if match is None or match.group(2) in (".", ".."):
        return None
    number = int(match.group(3))
    if not _valid_number(number):
        return None
    return f"{match.group(1)}/{match.group(2)}".lower(), number


def _valid_number(value: object) -> bool:
    """An issue number a ref can carry: 1 to :data:`MAX_ISSUE_NUMBER`."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and 0 < value <= MAX_ISSUE_NUMBER)


def _is_issue(value: object) -> bool:
    return isinstance(value, dict) and _valid_number(value.get("number"))


def _repository_of(issue: dict[str, Any]) -> str | None:
    """The ``owner/repo`` an issue answer says it belongs to (``repository_url``, else
    ``html_url``), lower-cased; ``None`` when it names none."""
    for key, pattern in (("repository_url", _API_REPO_RE), ("html_url", _HTML_REPO_RE)):
        value = issue.get(key)
        match = re.search(pattern, value) if isinstance(value, str) else None
        if match is not None:
            try:
                return parse_scope(f"{match.group(1)}/{match.group(2)}")
            except ValueError:
                return None
    return None


def _describe(response: GhResponse) -> str:
    if response.auth_failed:
        return (f"GitHub refused the credentials (HTTP {response.status}: "
                f"{response.message()}); {_LOGIN_HINT}")
    return f"GitHub answered HTTP {response.status}: {response.message()}"
