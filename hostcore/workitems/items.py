"""Work items as providers report them: refs, items, listings, closures, errors, events.

These types cross the plugin boundary between a provider (the gh plugin) and the
poller, and the boundary between the poller and ``hostcore_work_item_event``
implementations, so they are msgspec Structs that decode tolerantly.

A ref is a provider's text name for one item (``owner/repo#123`` for GitHub). The
host treats it as opaque text with a bounded shape (:meth:`WorkItemRef.parse`);
what it means is the provider's business (``owns``, ``scope_of``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from hostcore.errors import HostcoreError

# A ref longer than this is not a ref: it is refused before it reaches a file name.
MAX_REF_LENGTH = 512

ScopeStatus = Literal["complete", "failed", "interrupted", "degraded"]
ClosureState = Literal["open", "closed", "merged", "moved"]
EventKind = Literal["opened", "changed", "commented", "closed", "moved"]


class WorkItemRef(msgspec.Struct, frozen=True, order=True):
    """The name of one work item, as its provider spells it."""

    ref: str

    @classmethod
    def parse(cls, text: object) -> WorkItemRef:
        """A ref from ``text``; :class:`ValueError` naming the input if it is not one.

        A ref is 1 to :data:`MAX_REF_LENGTH` characters of printable text with no
        leading or trailing space. Anything else (a control character, an empty
        string, a number) is refused.
        """
        if not isinstance(text, str):
            raise ValueError(f"work-item ref {text!r} is not text")
        if not text or len(text) > MAX_REF_LENGTH:
            raise ValueError(
                f"work-item ref {text[:80]!r} must be 1 to {MAX_REF_LENGTH} characters")
        if text != text.strip() or not text.isprintable():
            raise ValueError(f"work-item ref {text[:80]!r} has spaces at an end or "
                             "non-printable characters")
        return cls(text)

    def __str__(self) -> str:
        return self.ref


class WorkItem(msgspec.Struct, frozen=True, kw_only=True):
    """One open item in a listing.

    ``updated_at`` is the provider's own change marker (any text that changes when
    the item does); the poller compares it with the one it saw last.
    ``comment_ids`` are the item's recent comments, when the provider reports
    them; new ones raise a ``commented`` event.
    """

    ref: WorkItemRef
    kind: Literal["issue", "pull_request"] = "issue"
    title: str = ""
    url: str = ""
    updated_at: str = ""
    labels: tuple[str, ...] = ()
    comment_ids: tuple[str, ...] = ()


class ScopeListing(msgspec.Struct, frozen=True, kw_only=True):
    """What a provider could list for one scope (``owner/repo``).

    ``complete`` means every item of the scope is in ``items``; ``failed`` that
    nothing usable came back; ``interrupted`` that listing stopped part way (a page
    budget, the cycle's time budget, a stop request); ``degraded`` that the
    provider is throttled in this scope (a rate limit) and will not be asked more
    this cycle. A complete scope proves, for its own scope only, that an item
    missing from it is no longer open.

    ``changed_since`` lets an interrupted scope prove part of that: set, it says
    that every open item whose change marker (``WorkItem.updated_at``) sorts after
    it as text is in ``items`` (a listing ordered by last change, newest first,
    stopped part way). The poller then reconciles the records last seen with a
    later marker and pauses the rest. Leave it empty unless the markers sort as text.

    ``capped`` marks an interruption by the provider's own bound on how much it
    lists per cycle (a page budget): the scope is too big to list whole by design,
    which the same listing will meet every cycle, so it is reported but is not a
    failure of the cycle. A time budget or a stop is not a cap.
    """

    scope: str
    status: ScopeStatus
    items: tuple[WorkItem, ...] = ()
    reason: str = ""
    reset_at: str = ""
    changed_since: str = ""
    capped: bool = False


class Listing(msgspec.Struct, frozen=True):
    """A provider's listing: one :class:`ScopeListing` per scope it covers."""

    scopes: tuple[ScopeListing, ...] = ()

    @property
    def items(self) -> list[WorkItem]:
        return [item for scope in self.scopes for item in scope.items]

    def scopes_with(self, status: ScopeStatus) -> list[str]:
        return [s.scope for s in self.scopes if s.status == status]

    @property
    def reconcilable(self) -> bool:
        """True when every scope's absences mean something: no scope failed or was
        interrupted. The poller reconciles scope by scope either way."""
        return not any(s.status in ("failed", "interrupted") for s in self.scopes)


class Closure(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's answer to "did this item end?".

    ``state`` is ``open``, ``closed`` or ``merged`` (pull requests), or ``moved``
    when the item now lives under another ref (a transfer, a renamed scope):
    ``moved_to`` names it. ``state_reason`` is the provider's reason
    (``completed``, ``not_planned``…).
    """

    state: ClosureState
    state_reason: str = ""
    closed_at: str = ""
    closed_by: str = ""
    moved_to: str = ""

    @property
    def ended(self) -> bool:
        return self.state != "open"


class ProviderError(HostcoreError):
    """A provider could not answer. The message names the ref or scope.

    ``degrades_scope`` is set when asking again this cycle is pointless (a rate
    limit): the poller then skips the rest of ``scope`` for the cycle.
    ``reset_at`` is when the provider expects to answer again, if known.
    ``gone`` says the provider was told the item does not exist (GitHub's 404), and
    ``final`` that this will not change (GitHub's 410 for a deleted issue): the
    poller stops asking about a gone item once the answer is final, or after it
    came back the same several times in a row.
    """

    def __init__(self, message: str, *, ref: str | None = None, scope: str | None = None,
                 degrades_scope: bool = False, reset_at: str = "", gone: bool = False,
                 final: bool = False) -> None:
        super().__init__(message)
        self.ref = ref
        self.scope = scope
        self.degrades_scope = degrades_scope
        self.reset_at = reset_at
        self.gone = gone or final
        self.final = final


class WorkItemEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What ``hostcore_work_item_event`` receives.

    ``item`` is set for ``opened``, ``changed`` and ``commented``; ``closure`` for
    ``closed`` and ``moved`` (``closure.moved_to`` is the item's new ref; a moved
    item is not announced ``opened`` again under it). ``comment_ids`` lists the
    new comments of a ``commented`` event.
    ``at`` is when the poller saw it (UTC ``%Y-%m-%dT%H:%M:%SZ``).
    """

    kind: EventKind
    ref: WorkItemRef
    provider: str
    at: str
    item: WorkItem | None = None
    closure: Closure | None = None
    comment_ids: tuple[str, ...] = ()
