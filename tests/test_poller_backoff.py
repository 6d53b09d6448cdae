"""The per-item backoff schedule (hostcore.workitems.backoff) and how a record keeps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hostcore.timestamps import format_utc, parse_exact
from hostcore.workitems import backoff
from hostcore.workitems.records import (
    PollSection,
    PortableRecord,
    decode_record,
    encode_record,
    with_backoff,
)

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
BASE = timedelta(minutes=1)
CAP = timedelta(hours=1)


def after(failures: int, **kw: bool) -> backoff.Backoff:
    found = None
    for _ in range(failures):
        found = backoff.failed(found, NOW, base=BASE, cap=CAP, error="boom", **kw)
    assert found is not None
    return found


def delay(b: backoff.Backoff) -> timedelta:
    at = parse_exact(b.next_ask_at)
    assert at is not None
    return at - NOW


@pytest.mark.parametrize(("failures", "full"), [(1, 60), (2, 120), (3, 240), (6, 1920),
                                                (7, 3600), (40, 3600)])
def test_the_delay_doubles_from_the_base_up_to_the_cap_jittered_down_by_at_most_a_fifth(
        failures, full):
    for _ in range(20):
        seconds = delay(after(failures)).total_seconds()
        assert full * (1 - backoff.JITTER) - 1 <= seconds <= full


def test_without_jitter_the_delay_is_exact():
    assert delay(after(3, jitter=False)) == timedelta(minutes=4)


def test_jitter_spreads_records_that_failed_together():
    assert len({after(1).next_ask_at for _ in range(30)}) > 1


def test_the_first_failure_is_kept_across_failures_in_a_row():
    first = backoff.failed(None, NOW, base=BASE, cap=CAP, error="one")
    later = backoff.failed(first, NOW + timedelta(hours=3), base=BASE, cap=CAP, error="two")
    assert later.first_failed_at == format_utc(NOW)
    assert later.failed_at == format_utc(NOW + timedelta(hours=3))
    assert later.failures == 2 and later.error == "two"


def test_a_long_error_is_cut():
    found = backoff.failed(None, NOW, base=BASE, cap=CAP, error="x" * 5000)
    assert len(found.error) == backoff.ERROR_LENGTH


def test_gone_answers_become_final_after_enough_in_a_row_and_another_error_resets_them():
    twice = after(backoff.GONE_FINAL_AFTER - 1, gone=True)
    assert not twice.final and backoff.standing(twice)
    reset = backoff.failed(twice, NOW, base=BASE, cap=CAP, error="502")
    assert reset.gone == 0 and not reset.final
    final = after(backoff.GONE_FINAL_AFTER, gone=True)
    assert final.final and final.next_ask_at == "" and not backoff.standing(final)
    assert not backoff.due(final, NOW + timedelta(days=365))


def test_a_final_answer_is_final_at_once():
    found = backoff.failed(None, NOW, base=BASE, cap=CAP, error="410", final=True)
    assert found.final and found.gone == 1 and not backoff.standing(found)


def test_due_when_the_next_ask_time_has_come_or_does_not_parse():
    found = after(1, jitter=False)
    assert backoff.due(None, NOW)
    assert not backoff.due(found, NOW + timedelta(seconds=59))
    assert backoff.due(found, NOW + timedelta(seconds=60))
    assert backoff.due(backoff.Backoff(failures=1, next_ask_at="soon"), NOW)


def test_the_backoff_round_trips_through_the_record_file_in_camel_case():
    found = after(2)
    record = with_backoff(PortableRecord(ref="o/r#1", session={"id": "s"}), found)
    assert record is not None and record.poll == PollSection(backoff=found)
    data = encode_record(record)
    assert b'"nextAskAt"' in data and b'"firstFailedAt"' in data
    assert decode_record(data, what="test").poll.backoff == found


def test_setting_the_same_backoff_again_writes_nothing():
    found = after(1)
    record = with_backoff(PortableRecord(ref="o/r#1", poll=PollSection()), found)
    assert record is not None
    assert with_backoff(record, found) is None
    cleared = with_backoff(record, None)
    assert cleared is not None and cleared.poll.backoff is None
