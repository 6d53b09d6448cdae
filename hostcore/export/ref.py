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

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import msgspec

# SHA-256 without hashlib's OpenSSL: a cold `status` or `run --once` folds a policy
# fingerprint.
from hostcore.digests import sha256 as _sha256
from hostcore.errors import HostcoreError

DEFAULT_STREAM = "main"
# The longest identity a Ref carries: a hash is 64 hex digits; a destination may
# publish its own, shorter or longer, but never free text.
IDENTITY_MAX_CHARS = 256
# An expectation that a component holds nothing yet: a first write that must not
# overwrite a value it never saw (create-only). Not a hash, so never a value.
ABSENT = "(absent)"

# The governance components, in the order every report lists them.
GOVERNANCE: tuple[str, ...] = ("context", "terms", "decisions")
COMPONENTS: tuple[str, ...] = ("content", *GOVERNANCE)
# SHA-256 of no bytes: the identity of an empty set (``identity()``).
EMPTY_IDENTITY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Status(StrEnum):
    """The outcome of comparing one component of two refs."""

    UNKNOWN = "unknown"  # one side makes no claim; nothing can be compared
    CURRENT = "current"  # both sides hold the same value
    BEHIND = "behind"  # the local position trails the remote one
    AHEAD = "ahead"  # the local position leads the remote one
    MOVED = "moved"  # two identities differ; a hash says nothing more


class Ref(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One stream's position and governance identities. The zero ref claims nothing.

    Fields are checked when a Ref is built or decoded (``ValueError``, or
    ``msgspec.ValidationError`` when decoding): ``content`` is an ``int`` of at
    least ``0``; each identity is a ``str`` of at most :data:`IDENTITY_MAX_CHARS`
    characters with no control character (a hash, or :data:`ABSENT` in an
    expectation), so a Ref a plugin hands over can never smuggle a separator
    into a comparison, a file or a message.
    """

    content: int = 0
    context: str = ""
    terms: str = ""
    decisions: str = ""

    def __post_init__(self) -> None:
        if type(self.content) is not int or self.content < 0:
            raise ValueError(f"ref content {self.content!r}: expected a position (an int >= 0)")
        for name in GOVERNANCE:
            value = getattr(self, name)
            if type(value) is not str or len(value) > IDENTITY_MAX_CHARS or _has_control(value):
                raise ValueError(f"ref {name} {str(value)[:80]!r}: expected an identity (text of "
                                 f"at most {IDENTITY_MAX_CHARS} characters, no control "
                                 "characters)")

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
    ``("a", "bc")`` hash differently. A field containing NUL would make two
    different lists hash alike, so it raises ``ValueError``: callers passing
    text a plugin supplied check it where the plugin hands it over.
    """
    for field in fields:
        if "\0" in field:
            raise ValueError(f"identity field {field[:80]!r} contains NUL, the field separator")
    text = "\0".join(fields)
    if not text:
        return EMPTY_IDENTITY  # the common empty set, without hashing
    return sha256_hex(text.encode("utf-8"))


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data`` (what ``hashlib.sha256`` gives, without
    loading OpenSSL)."""
    return _sha256(data).hexdigest()


def fold(members: Mapping[str, str]) -> str:
    """Fold named member identities into one component identity (SHA-256 hex).

    For each name in sorted order the bytes ``name NUL hash LF`` (UTF-8) are
    hashed. ``fold({})`` is the digest of no bytes: a claim that the set is
    empty, which is not the same as ``""`` (no claim at all). A name or hash
    containing NUL or LF would let two different sets fold alike, so it raises
    ``ValueError``.
    """
    digest = _sha256()
    for name in sorted(members):
        member = members[name]
        for text in (name, member):
            if "\0" in text or "\n" in text:
                raise ValueError(f"fold member {text[:80]!r} contains NUL or a newline, "
                                 "the separators of a fold")
        digest.update(f"{name}\0{member}\n".encode())
    return digest.hexdigest()


def _has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


class ComponentConflict(msgspec.Struct, frozen=True, kw_only=True):
    """One governance component a write found moved: what the writer expected it
    to hold (:data:`ABSENT`: nothing yet; ``""``: no agreement on record), what
    it holds, and the value the writer tried to put there."""

    component: str
    expected: str
    found: str
    attempted: str = ""


class Conflict(HostcoreError):
    """A governance write found components moved at the destination since they were read.

    It names every component that moved (:attr:`conflicts`, in the order
    context, terms, decisions), the stream and destination when known, and the
    value this side tried to write. ``component``, ``expected`` and ``actual``
    are those of the first. It pickles, so a worker process can report it.
    """

    def __init__(self, component: str, expected: str, actual: str, *, attempted: str = "",
                 stream: str = "", destination: str = "",
                 more: Iterable[ComponentConflict] = ()) -> None:
        self.component = component
        self.expected = expected
        self.actual = actual
        self.stream = stream
        self.destination = destination
        first = ComponentConflict(component=component, expected=expected, found=actual,
                                  attempted=attempted)
        self.conflicts: tuple[ComponentConflict, ...] = (first, *more)
        super().__init__(_conflict_message(self.conflicts, stream, destination))

    @classmethod
    def of(cls, conflicts: Iterable[ComponentConflict], *, stream: str = "",
           destination: str = "") -> Conflict:
        """One Conflict naming every one of ``conflicts`` (at least one)."""
        first, *more = conflicts
        return cls(first.component, first.expected, first.found, attempted=first.attempted,
                   stream=stream, destination=destination, more=more)

    @property
    def components(self) -> list[str]:
        """The names of the components that moved."""
        return [c.component for c in self.conflicts]

    def at(self, destination: str) -> Conflict:
        """This conflict, naming ``destination`` (what a pusher adds to a destination's)."""
        return Conflict.of(self.conflicts, stream=self.stream, destination=destination)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_conflict, (self.conflicts, self.stream, self.destination))


def _rebuild_conflict(conflicts: tuple[ComponentConflict, ...], stream: str,
                      destination: str) -> Conflict:
    return Conflict.of(conflicts, stream=stream, destination=destination)


def _conflict_message(conflicts: tuple[ComponentConflict, ...], stream: str,
                      destination: str) -> str:
    names = [c.component for c in conflicts]
    where = " at the destination" + (f" {destination!r}" if destination else "")
    if stream:
        where += f" (stream {stream!r})"
    parts = []
    for c in conflicts:
        part = f"{c.component}: expected {_shown(c.expected)}, found {_shown(c.found)}"
        if c.attempted:
            part += f"; this side tried to write {_shown(c.attempted)}"
        parts.append(part)
    return (f"{' and '.join(names)} moved{where}: {'; '.join(parts)}. Retrying the same "
            "write cannot resolve this: someone must decide which value stands, then write "
            "against the value found.")


def _shown(value: str) -> str:
    if value == ABSENT:
        return "nothing yet"
    return value or "(none)"


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
