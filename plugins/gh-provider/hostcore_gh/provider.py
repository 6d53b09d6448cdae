"""The ``gh`` work-item provider: GitHub issues and pull requests of configured repos.

Refs are ``owner/repo#123`` with ``owner/repo`` in lower case (GitHub names are
case-insensitive, a ledger key must not be). A scope is one ``owner/repo``.

Listing uses the REST issues endpoint (pull requests included) with
``state=open&per_page=100`` and walks every page: the next page is asked for
while the ``Link`` header names one (or, without a ``Link`` header, while a page
comes back full). With ``labels`` configured, each label is listed on its own and
the results are merged, so an item carrying any of them is listed. A scope is:

* ``complete`` when every page of every label came back;
* ``degraded`` when GitHub rate-limited a request (nothing more is asked in that
  scope this cycle, and its reset time is kept);
* ``interrupted`` when the page budget ran out with pages left;
* ``failed`` on anything else (no answer, auth, not found, a body that is not a
  list of issues).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import msgspec

from hostcore.errors import ConfigError
from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItem,
    WorkItemRef,
)
from hostcore_gh.runner import GhError, GhResponse, GhRunner

# At most this many pages (of PER_PAGE items) per label per repository per cycle.
LISTING_MAX_PAGES = 50
PER_PAGE = 100

_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_REPO = r"[A-Za-z0-9._-]{1,100}"
_SCOPE_RE = re.compile(rf"^({_OWNER})/({_REPO})$")
_REF_RE = re.compile(rf"^({_OWNER})/({_REPO})#([1-9][0-9]{{0,9}})$")
_NEXT_RE = re.compile(r'<[^>]*>\s*;\s*rel="?next"?')
_LOGIN_HINT = "run `gh auth login` (or set GH_TOKEN) with access to it"


class GhConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.gh]`` in ``hostcore.toml``."""

    repos: list[str] = []
    labels: list[str] = []


def parse_scope(text: str) -> str:
    """``owner/repo`` lower-cased; :class:`ValueError` naming ``text`` otherwise."""
    match = _SCOPE_RE.match(text)
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
    items when no label is configured), asked through ``runner``."""

    name = "gh"

    def __init__(self, config: GhConfig, runner: GhRunner, *,
                 max_pages: int = LISTING_MAX_PAGES) -> None:
        self.scopes = sorted({parse_scope(repo) for repo in config.repos})
        self.labels = sorted(set(config.labels))
        self.runner = runner
        self.max_pages = max_pages

    # -- registration contract -------------------------------------------------------

    def availability(self) -> str | None:
        reason = self.runner.availability()
        if reason is not None:
            return reason
        if not self.scopes:
            return "no repository to poll: set repos = [\"owner/repo\"] under [plugins.gh]"
        return None

    def status(self) -> dict[str, Any]:
        return {"repos": len(self.scopes), "labels": len(self.labels),
                "gh_runs": self.runner.runs}

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
        for label in self.labels or [None]:
            try:
                for issue in self._pages(scope, label):
                    items.setdefault(issue["number"], self._item(scope, issue))
            except _ScopeStop as stop:
                return ScopeListing(scope=scope, status=stop.status, reason=stop.reason,
                                    reset_at=stop.reset_at)
        ordered = tuple(items[number] for number in sorted(items))
        return ScopeListing(scope=scope, status="complete", items=ordered)

    def _pages(self, scope: str, label: str | None) -> Iterator[dict[str, Any]]:
        params = {"state": "open", "per_page": str(PER_PAGE)}
        if label is not None:
            params["labels"] = label
        for page in range(1, self.max_pages + 1):
            response = self._ask(f"repos/{scope}/issues", {**params, "page": str(page)},
                                 what=f"{scope} (page {page})", scope=scope)
            if not response.ok:
                raise _ScopeStop("failed", f"{_describe(response)} listing {scope}")
            try:
                issues = response.json()
            except GhError as exc:
                raise _ScopeStop("failed", f"listing {scope} page {page}: {exc}") from None
            if not isinstance(issues, list) or not all(_is_issue(i) for i in issues):
                raise _ScopeStop("failed", f"listing {scope} page {page}: the answer is not "
                                           "a list of issues")
            yield from issues
            link = response.headers.get("link")
            more = bool(_NEXT_RE.search(link)) if link is not None else len(issues) >= PER_PAGE
            if not more:
                return
        raise _ScopeStop("interrupted", f"listing {scope} stopped after {self.max_pages} "
                                        "pages with more to come")

    def _ask(self, path: str, params: dict[str, str] | None, *, what: str,
             scope: str) -> GhResponse:
        """One request; a rate limit stops the scope (listing) as degraded."""
        try:
            response = self.runner.api(path, params=params)
        except GhError as exc:
            raise _ScopeStop("failed", f"{what}: {exc}") from None
        if response.rate_limited:
            reset = _reset_text(response)
            raise _ScopeStop("degraded", f"GitHub rate limit reached for {scope}; "
                                         f"resets at {reset or 'an unknown time'}",
                             reset_at=reset)
        return response

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
        """Closed, merged (a pull request) or still open, with GitHub's state_reason.

        Raises :class:`ProviderError` naming the ref when GitHub cannot answer:
        not found, not authorised, rate-limited (with the reset time; the scope is
        degraded for the rest of the cycle), no answer, or an answer that is not
        an issue.
        """
        parsed = _parse_ref(ref.ref)
        if parsed is None or parsed[0] not in self.scopes:
            raise ProviderError(f"{ref.ref!r} is not an issue of a configured repository",
                                ref=ref.ref)
        scope, number = parsed
        issue = self._closure_answer(f"repos/{scope}/issues/{number}", ref.ref, scope)
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
                self._closure_answer(f"repos/{scope}/pulls/{number}", ref.ref, scope) \
                    .get("merged_at")
            if merged:
                return msgspec.structs.replace(closure, state="merged")
        return closure

    def _closure_answer(self, path: str, ref: str, scope: str) -> dict[str, Any]:
        try:
            response = self.runner.api(path)
        except GhError as exc:
            raise ProviderError(f"{ref}: {exc}", ref=ref, scope=scope) from None
        if response.rate_limited:
            reset = _reset_text(response)
            raise ProviderError(f"{ref}: GitHub rate limit reached; resets at "
                                f"{reset or 'an unknown time'}",
                                ref=ref, scope=scope, degrades_scope=True, reset_at=reset)
        if response.status in (404, 410):
            raise ProviderError(f"{ref}: not found on GitHub (HTTP {response.status})",
                                ref=ref, scope=scope)
        if not response.ok:
            raise ProviderError(f"{ref}: {_describe(response)}", ref=ref, scope=scope)
        try:
            body = response.json()
        except GhError as exc:
            raise ProviderError(f"{ref}: {exc}", ref=ref, scope=scope) from None
        if not isinstance(body, dict):
            raise ProviderError(f"{ref}: GitHub's answer is not an issue", ref=ref, scope=scope)
        return body


class _ScopeStop(Exception):
    """Listing of one scope ends early with this status."""

    def __init__(self, status: str, reason: str, *, reset_at: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.reset_at = reset_at


def _parse_ref(text: str) -> tuple[str, int] | None:
    match = _REF_RE.match(text)
    if match is None or match.group(2) in (".", ".."):
        return None
    return f"{match.group(1)}/{match.group(2)}".lower(), int(match.group(3))


def _is_issue(value: object) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("number"), int)
            and not isinstance(value.get("number"), bool) and value["number"] > 0)


def _describe(response: GhResponse) -> str:
    if response.auth_failed:
        return (f"GitHub refused the credentials (HTTP {response.status}: "
                f"{response.message()}); {_LOGIN_HINT}")
    return f"GitHub answered HTTP {response.status}: {response.message()}"


def _reset_text(response: GhResponse) -> str:
    reset: datetime | None = response.rate_limit_reset()
    return reset.strftime("%Y-%m-%dT%H:%M:%SZ") if reset is not None else ""
