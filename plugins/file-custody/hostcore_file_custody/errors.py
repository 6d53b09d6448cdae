"""Exceptions of the file custody plugin. Each message names the path or instance at fault."""

from __future__ import annotations

from hostcore.errors import HostcoreError


class CustodyError(HostcoreError):
    """Base class for every error this plugin raises on purpose."""


class UnsafePathError(CustodyError):
    """A path is a symlink, not a regular file, or otherwise unsafe to take custody of."""


class UnstableRevisionError(CustodyError):
    """A file changed or moved while its revision was being captured."""


class CustodyRefused(CustodyError):
    """Generation custody of an instance is held by a live or uncertain competing owner.

    ``reason`` is ``"held"`` (another owner holds the instance's lock),
    ``"uncertain"`` (the lock file cannot be trusted or locked) or ``"closed"``
    (the session whose custody was to be reused has ended).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class WitnessError(CustodyError):
    """A writer's generation witness is missing or no longer current.

    ``reason`` is ``"missing"`` (no witness: materialise or repair first),
    ``"stale"`` (another generation is current), ``"ended"`` (the generation is
    terminal or archived) or ``"unrecorded"`` (no generation record exists).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
