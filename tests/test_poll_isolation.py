"""The tracked set when a cycle cannot ask all of it: each cycle, from cron's new
process too, starts after the last record the previous one asked, and records whose
question fails come after every healthy one."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hostcore.workitems.items import (
    Closure,
    Listing,
    ProviderError,
    ScopeListing,
    WorkItemEvent,
    WorkItemRef,
)
from hostcore.workitems.ledger import Ledger, PollSection, PortableRecord
from hostcore.workitems.poller import Poller, PollSummary

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
LONG_AGO = "2020-01-01T00:00:00Z"


class StoppingProvider:
    """Answers "still open" (or raises what ``answers`` holds), and asks the cycle to
    stop after ``per_cycle`` questions, as a spent time budget would."""

    name = "fake"

    def __init__(self, per_cycle: int) -> None:
        self.per_cycle = per_cycle
        self.stop = threading.Event()
        self.asked: list[str] = []
        self.answers: dict[str, Exception] = {}

    def owns(self, ref: WorkItemRef) -> bool:
        return ref.ref.startswith("o/r#")

    def scope_of(self, ref: WorkItemRef) -> str:
        return ref.ref.split("#")[0]

    def list_items(self) -> Listing:
        return Listing((ScopeListing(scope="o/r", status="complete"),))

    def closure(self, ref: WorkItemRef) -> Closure:
        self.asked.append(ref.ref)
        if len(self.asked) % self.per_cycle == 0:
            self.stop.set()
        if ref.ref in self.answers:
            raise self.answers[ref.ref]
        return Closure(state="open")


def plant(ledger: Ledger, *numbers: int) -> None:
    for n in numbers:
        ledger.write(PortableRecord(ref=f"o/r#{n}", session={"id": "s"},
                                    poll=PollSection(last_polled_at=LONG_AGO)))


def cron_cycle(root: Path, provider: StoppingProvider, at: datetime) -> PollSummary:
    """One cycle by a new Poller over a new Ledger: a new process, as cron runs it."""
    provider.stop.clear()
    ledger = Ledger(root)

    def dispatch(event: WorkItemEvent) -> int:
        return 0

    poller = Poller(ledger, [provider], dispatch=dispatch, emit=lambda *a, **k: None,
                    interval=lambda: 60.0, clock=lambda: at)
    try:
        (summary,) = poller.cycle(provider.stop)
        return summary
    finally:
        ledger.close()


def asked_in(provider: StoppingProvider, run: Any) -> list[str]:
    before = len(provider.asked)
    run()
    return provider.asked[before:]


def test_a_budget_too_small_for_the_tracked_set_still_reaches_all_of_it(tmp_path):
    root = tmp_path / "ledger"
    ledger = Ledger(root)
    plant(ledger, *range(1, 8))
    ledger.close()
    provider = StoppingProvider(per_cycle=3)

    rounds = [asked_in(provider, lambda: cron_cycle(root, provider, NOW)) for _ in range(3)]

    assert rounds == [["o/r#1", "o/r#2", "o/r#3"], ["o/r#4", "o/r#5", "o/r#6"],
                      ["o/r#7", "o/r#1", "o/r#2"]]


def test_failing_records_come_after_every_healthy_one_even_when_resuming(tmp_path):
    root = tmp_path / "ledger"
    ledger = Ledger(root)
    plant(ledger, *range(1, 6))
    ledger.close()
    provider = StoppingProvider(per_cycle=5)
    provider.answers["o/r#1"] = ProviderError("no answer", ref="o/r#1")

    first = cron_cycle(root, provider, NOW)
    assert first.failing == 1 and provider.asked[0] == "o/r#1"
    later = NOW + timedelta(minutes=5)  # o/r#1's backoff has come
    second = asked_in(provider, lambda: cron_cycle(root, provider, later))

    assert second == ["o/r#2", "o/r#3", "o/r#4", "o/r#5", "o/r#1"]
