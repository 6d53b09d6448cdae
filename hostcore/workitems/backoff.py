"""Per-item backoff: a question about one record failed, so ask it again later.

The schedule is kept on the record (``poll.backoff``), not in the process: ``hostcore
poll --once`` from cron is a new process every cycle and must honour it too. The
delay doubles with each failure in a row from one poll interval, is capped at the
recheck window, and is jittered downwards so that records which failed together
(a repository that went away) spread out instead of coming back as one burst.

tenacity schedules retries inside one call; this is a schedule across processes,
written as a timestamp, so it is computed here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from hostcore.timestamps import format_utc, parse_exact

if TYPE_CHECKING:
    import random

# The delay after the n-th failure in a row is BASE * 2**(n-1), cut to the cap, then
# multiplied by a factor drawn from [1 - JITTER, 1].
JITTER = 0.2
# A "does not exist" answer this many times in a row is taken as final.
GONE_FINAL_AFTER = 3
# A failure message kept on the record is cut to this many characters.
ERROR_LENGTH = 300

# Made on the first jittered failure: random's import and seeding are a
# millisecond of every cold start (`status`, `run --once`) that fails nothing.
_rng: random.Random | None = None


class Backoff(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """``poll.backoff``: the provider could not answer about this record.

    ``failures`` questions in a row failed, the first at ``first_failed_at`` and
    the last at ``failed_at`` with ``error``; the next is asked no sooner than
    ``next_ask_at``. ``gone`` counts the "does not exist" answers in a row;
    ``final`` says the answer will not change, so the record is not asked again
    (until its item is listed again, which drops the whole section).
    """

    failures: int = 0
    first_failed_at: str = ""
    failed_at: str = ""
    error: str = ""
    next_ask_at: str = ""
    gone: int = 0
    final: bool = False


def failed(previous: Backoff | None, now: datetime, *, base: timedelta, cap: timedelta,
           error: str, gone: bool = False, final: bool = False,
           jitter: bool = True) -> Backoff:
    """The backoff after one more failed question at ``now`` (``jitter`` False: the
    delay exactly, for a schedule that must match another one)."""
    failures = (previous.failures if previous is not None else 0) + 1
    gone_count = (previous.gone if previous is not None else 0) + 1 if gone or final else 0
    is_final = final or gone_count >= GONE_FINAL_AFTER
    delay = min(cap, base * 2 ** min(failures - 1, 32))
    if jitter:
        delay *= _jitter_rng().uniform(1 - JITTER, 1)
    stamp = format_utc(now)
    first = previous.first_failed_at if previous is not None and previous.first_failed_at \
        else stamp
    return Backoff(failures=failures, first_failed_at=first, failed_at=stamp,
                   error=error[:ERROR_LENGTH], gone=gone_count, final=is_final,
                   next_ask_at="" if is_final else format_utc(now + delay))


def _jitter_rng() -> random.Random:
    global _rng
    if _rng is None:
        import random  # here, not at the top: see _rng

        _rng = random.Random()
    return _rng


def due(backoff: Backoff | None, now: datetime) -> bool:
    """Whether a record with ``backoff`` may be asked at ``now``: no backoff, or its
    next-ask time has come (one that does not parse reads as come); never once final."""
    if backoff is None:
        return True
    if backoff.final:
        return False
    at = parse_exact(backoff.next_ask_at)
    return at is None or at <= now


def standing(backoff: Backoff | None) -> bool:
    """Whether the record's last question failed and it will be asked again: a
    failure that stands (a final answer is settled, not a failure)."""
    return backoff is not None and not backoff.final and backoff.failures > 0
