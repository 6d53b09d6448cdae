"""The time a poll cycle may still spend, and whether it was asked to stop.

The poller gives each provider's part of a cycle a :class:`CycleBudget` (a share
of ``[poll] cycle_budget_seconds``, and the stop event of ``hostcore poll``) and
makes it :func:`current` while the provider lists and answers. A provider that
asks a remote service bounds each question with it::

    from hostcore.workitems.budget import current

    budget = current()
    deadline = budget.deadline_for(20.0) if budget else None   # time.monotonic() based
    if budget is not None and budget.spent():
        ...  # report the scope interrupted instead of asking

The poller also checks it between questions, so a provider that ignores it
overruns by at most one question. Outside a poll cycle :func:`current` is ``None``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar

_current: ContextVar[CycleBudget | None] = ContextVar("hostcore_poll_budget", default=None)


class CycleBudget:
    """A deadline on :func:`time.monotonic`'s clock (``None``: unbounded) and an
    optional stop event (SIGINT/SIGTERM set it)."""

    def __init__(self, deadline: float | None, stop: threading.Event | None = None) -> None:
        self.deadline = deadline
        self.stop = stop

    def stopped(self) -> bool:
        """True once a stop was requested."""
        return self.stop is not None and self.stop.is_set()

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` when unbounded."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def spent(self) -> bool:
        """True when no time is left or a stop was requested: ask nothing more."""
        left = self.remaining()
        return self.stopped() or (left is not None and left <= 0)

    def deadline_for(self, seconds: float) -> float:
        """The deadline of one question allowed ``seconds``: the earlier of now plus
        ``seconds`` and this budget's deadline."""
        own = time.monotonic() + seconds
        return own if self.deadline is None else min(own, self.deadline)


def current() -> CycleBudget | None:
    """The budget of the poll cycle this code runs in, if any."""
    return _current.get()


@contextlib.contextmanager
def applied(budget: CycleBudget) -> Iterator[CycleBudget]:
    """Make ``budget`` :func:`current` for the block (this thread and context only)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
