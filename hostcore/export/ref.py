"""The composite freshness ref: how far what is held here sits from what is held there.

A :class:`Ref` has four components of two kinds:

* ``content`` is a position in the stream's ordered feed. Positions are ordered,
  so a side can be ``behind`` or ``ahead``; a transfer resumes from one. ``0``
  means "no position in this answer", never "rewind to the beginning".
* ``context``, ``terms`` and ``decisions`` are identity hashes of the governance
  in force. Two different hashes carry no order: all a comparison can say is
  that the component ``moved``. An empty identity makes no claim.

Everything that compares refs calls :func:`compare`, and everything that makes
a governance identity calls :func:`identity` or :func:`fold`; they are the only
hash definitions in hostcore, so two sides hashing the same set always agree.
Adding a component changes exactly :class:`Ref`, :class:`Divergence` and
:func:`compare`.

The JSON form uses the names ``content``, ``context``, ``terms`` and
``decisions``; a component equal to its zero value (``0`` or ``""``) is omitted,
and a missing one decodes as that zero value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from enum import StrEnum

import msgspec

from hostcore.errors import HostcoreError

DEFAULT_STREAM = "main"
# An expectation that a component holds nothing yet: a first write that must not
# overwrite a value it never saw (create-only). Not a hash, so never a value.
ABSENT = "(absent)"

# The governance components, in the order every report lists them.
GOVERNANCE: tuple[str, ...] = ("context", "terms", "decisions")
COMPONENTS: tuple[str, ...] = ("content", *GOVERNANCE)


class Status(StrEnum):
    """The outcome of comparing one component of two refs."""

    UNKNOWN = "unknown"  # one side makes no claim; nothing can be compared
    CURRENT = "current"  # both sides hold the same value
    BEHIND = "behind"  # the local position trails the remote one
    AHEAD = "ahead"  # the local position leads the remote one
    MOVED = "moved"  # two identities differ; a hash says nothing more


class Ref(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One stream's position and governance identities. The zero ref claims nothing."""

    content: int = 0
    context: str = ""
    terms: str = ""
    decisions: str = ""

    def governance(self) -> dict[str, str]:
        """The three identities by component name (empty ones included)."""
        return {name: getattr(self, name) for name in GOVERNANCE}


class ComponentDiff(msgspec.Struct, frozen=True):
    """One component of a :class:`Divergence`: its name, status and both values."""

    component: str
    status: Status
    local: int | str
    remote: int | str


class Divergence(msgspec.Struct, frozen=True):
    """The result of :func:`compare`: one :class:`ComponentDiff` per component."""

    content: ComponentDiff
    context: ComponentDiff
    terms: ComponentDiff
    decisions: ComponentDiff

    def diffs(self) -> tuple[ComponentDiff, ...]:
        """Every component's diff, content first, then the governance components."""
        return tuple(getattr(self, name) for name in COMPONENTS)

    def moved(self) -> list[str]:
        """The governance components whose identities differ: context, terms, decisions.

        The position is never listed: content moves in the ordinary course of
        traffic, and reporting that as moved governance is the confusion the
        ref exists to end.
        """
        return [name for name in GOVERNANCE if getattr(self, name).status is Status.MOVED]

    def current(self) -> bool:
        """True when nothing is behind, ahead or moved; ``unknown`` is not a difference."""
        return all(d.status in (Status.CURRENT, Status.UNKNOWN) for d in self.diffs())


def compare(local: Ref, remote: Ref) -> Divergence:
    """Compare every component of ``local`` against ``remote``."""
    return Divergence(
        content=_compare_position(local.content, remote.content),
        context=_compare_identity("context", local.context, remote.context),
        terms=_compare_identity("terms", local.terms, remote.terms),
        decisions=_compare_identity("decisions", local.decisions, remote.decisions),
    )


def _compare_position(local: int, remote: int) -> ComponentDiff:
    if local == 0 or remote == 0:
        status = Status.UNKNOWN
    elif local == remote:
        status = Status.CURRENT
    else:
        status = Status.BEHIND if local < remote else Status.AHEAD
    return ComponentDiff("content", status, local, remote)


def _compare_identity(component: str, local: str, remote: str) -> ComponentDiff:
    if not local or not remote:
        status = Status.UNKNOWN
    elif local == remote:
        status = Status.CURRENT
    else:
        status = Status.MOVED
    return ComponentDiff(component, status, local, remote)


def advance(ref: Ref, position: int) -> Ref:
    """``ref`` with its position moved to ``position`` if that leads; else ``ref`` itself.

    A ``0`` (an answer that carried no position) or a lower position changes
    nothing: a resumable transfer must never be sent back to an earlier point.
    """
    if position > ref.content:
        return msgspec.structs.replace(ref, content=position)
    return ref


def identity(*fields: str) -> str:
    """The identity of one member of a governed set: SHA-256 hex of its fields.

    The fields are UTF-8 encoded and joined with NUL, so ``("ab", "c")`` and
    ``("a", "bc")`` hash differently.
    """
    return hashlib.sha256("\0".join(fields).encode("utf-8")).hexdigest()


def fold(members: Mapping[str, str]) -> str:
    """Fold named member identities into one component identity (SHA-256 hex).

    For each name in sorted order the bytes ``name NUL hash LF`` (UTF-8) are
    hashed. ``fold({})`` is the digest of no bytes: a claim that the set is
    empty, which is not the same as ``""`` (no claim at all).
    """
    digest = hashlib.sha256()
    for name in sorted(members):
        digest.update(f"{name}\0{members[name]}\n".encode())
    return digest.hexdigest()


class Conflict(HostcoreError):
    """A governance write found the destination's component moved since it was read."""

    def __init__(self, component: str, expected: str, actual: str) -> None:
        self.component = component
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{component} moved at the destination: expected {expected or '(none)'}, "
            f"found {actual or '(none)'}. Retrying the same write cannot resolve this: "
            f"someone must decide which {component} stands, then write against the "
            "value found."
        )


def assert_component(component: str, expected: str, actual: str) -> None:
    """Raise :class:`Conflict` if ``expected`` is non-empty and differs from ``actual``.

    An empty expectation asserts nothing and always passes, so a writer that
    predates refs keeps writing as it did. :data:`ABSENT` expects no value yet.
    """
    if component not in GOVERNANCE:
        raise ValueError(f"{component!r} is not a governance component ({', '.join(GOVERNANCE)})")
    if expected == ABSENT:
        if actual:
            raise Conflict(component, expected, actual)
        return
    if expected and expected != actual:
        raise Conflict(component, expected, actual)
