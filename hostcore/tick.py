"""The tick loop: every worker once per tick, each as its own step under the step lock.

A step that raises fails alone and is reported with its worker's name; the
other steps still run. Each step is supervised (:mod:`hostcore.steps`): it runs
on a thread of its own under a deadline, and one that overruns it, or a stop
request's grace, is abandoned, which ends the loop. A worker that reports
pending work brings the next tick forward (the backlog cadence). The last
tick's report is kept under the root (``last-tick.json``, disposable), so
``hostcore status`` in a new process can say what the loop last did and how
long ago.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from hostcore.files import keep_report, read_report
from hostcore.plugin.registration import StepFailed, Worker, WorkerResult, availability
from hostcore.steps import StepAbandoned, abandoned, deadline_of, supervise

if TYPE_CHECKING:
    from hostcore.host import Host

log = logging.getLogger("hostcore.tick")

# While a worker reports pending work, the next tick comes this soon (seconds).
BACKLOG_INTERVAL_SECONDS = 5.0
LAST_TICK_FILE = "last-tick.json"


class StepReport(msgspec.Struct):
    """The outcome of one step of a tick (one worker)."""

    name: str
    ok: bool
    pending: bool = False
    skipped: bool = False
    error: str | None = None
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    # Left running on its thread, past its deadline or a stop request's grace.
    abandoned: bool = False


class TickReport(msgspec.Struct):
    """Every step of one tick; ``finished_at`` is wall-clock seconds since the epoch."""

    steps: list[StepReport]
    duration_ms: int = 0
    finished_at: float = 0.0
    # Each source's ``last_*`` counters as the tick left them: kept with the report,
    # so `hostcore status` in another process shows what this tick read, not the
    # zeros of a process that read nothing.
    sources: dict[str, dict[str, int | bool | None]] = msgspec.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    @property
    def pending(self) -> bool:
        return any(step.pending for step in self.steps)

    @property
    def failed(self) -> list[StepReport]:
        return [step for step in self.steps if not step.ok]

    @property
    def abandoned(self) -> list[StepReport]:
        return [step for step in self.steps if step.abandoned]

    def count(self, step: str, *keys: str) -> int:
        """The sum of ``keys`` in the counts of the step called ``step`` (0 if absent)."""
        return sum(s.counts.get(k, 0) for s in self.steps if s.name == step for k in keys)

    def summary(self) -> str:
        """One line for a person: the outcome and what changed (rows in and out,
        questions asked of providers)."""
        ran = sum(not s.skipped for s in self.steps)
        state = "ok" if self.ok else f"failed ({len(self.failed)} of {ran} steps)"
        changes = {"rows in": self.count("ingest", "rows"),
                   "rows out": self.count("export", "rows"),
                   "questions": self.count("poll", "tracked_checks", "ledger_checks")}
        said = ", ".join(f"{name} {n:,}" for name, n in changes.items() if n)
        pending = "; work pending" if self.pending else ""
        return (f"tick {state} in {self.duration_ms} ms: "
                f"{said or 'nothing changed'}{pending}")


def tick(host: Host, stop: threading.Event | None = None) -> TickReport:
    """Run every worker once, in order; a stop request skips the remaining steps,
    and so does a step abandoned (it may still hold the step lock they need).

    Raises :class:`~hostcore.steps.StepAbandoned` while a step this process
    abandoned in an earlier tick still runs: every step would wait for the lock
    it holds.
    """
    if stop is not None:
        host.stop = stop  # so a long step (a poll cycle, say) can stop within it
    still = abandoned(host.root)
    if still:
        raise StepAbandoned(f"step {still[0]!r} was abandoned and still runs, holding the "
                            "step lock; start a new process to tick again")
    started = time.monotonic()
    steps: list[StepReport] = []
    for worker in host.workers:
        if (stop is not None and stop.is_set()) or any(s.abandoned for s in steps):
            steps.append(StepReport(name=worker.name, ok=True, skipped=True))
            continue
        steps.append(_run_step(host, worker))
    report = TickReport(steps=steps, duration_ms=int((time.monotonic() - started) * 1000),
                        finished_at=time.time(), sources=_source_counters(host))
    host.emit(
        "tick.completed",
        steps=sum(not s.skipped for s in steps),
        failed=len(report.failed),
        skipped=sum(s.skipped for s in steps),
        pending=report.pending,
        duration_ms=report.duration_ms,
    )
    if not host.read_only:
        save_last(host.root, report)
    return report


def _source_counters(host: Host) -> dict[str, dict[str, int | bool | None]]:
    """The ``last_*`` counters of every source; one whose ``status()`` raises is left
    out (its fault shows in `hostcore status` as the error it raises there)."""
    counters: dict[str, dict[str, int | bool | None]] = {}
    for source in host.sources:
        status = getattr(source, "status", None)
        try:
            reported = status() if callable(status) else {}
        except Exception:
            log.debug("a source's status() raised", exc_info=True)
            continue
        counters[source.name] = {k: v for k, v in reported.items() if k.startswith("last_")
                                 and (v is None or isinstance(v, int))}
    return counters


def _run_step(host: Host, worker: Worker) -> StepReport:
    if availability(worker) is not None:
        return StepReport(name=worker.name, ok=True, skipped=True)
    try:
        deadline = deadline_of(worker)
    except ValueError as exc:
        return StepReport(name=worker.name, ok=False, error=f"ValueError: {exc}")
    outcome = supervise(worker.name, lambda: worker.run(host), lock=host.step_lock,
                        scope=host.root, deadline=deadline, stop=host.stop)
    if outcome.ending == "never_started":  # stopped while it waited for the lock
        return StepReport(name=worker.name, ok=True, skipped=True)
    if outcome.error is not None:
        return _failed(worker.name, outcome.error, abandoned=outcome.ending == "abandoned")
    result = outcome.result
    if not isinstance(result, WorkerResult):
        return StepReport(name=worker.name, ok=False,
                          error=f"returned {type(result).__name__}, not WorkerResult")
    return StepReport(name=worker.name, ok=True, pending=result.pending,
                      counts=dict(result.counts))


def _failed(name: str, exc: BaseException, *, abandoned: bool) -> StepReport:
    counts: dict[str, int] = {}
    if isinstance(exc, StepFailed):  # what the step did before it failed, and why
        counts = exc.counts
        exc = exc.__cause__ if isinstance(exc.__cause__, BaseException) else exc
    # Log the kind of failure only: messages can carry paths or names.
    log.warning("step %r %s: %s", name, "abandoned" if abandoned else "failed",
                type(exc).__name__)
    log.debug("step %r failed", name, exc_info=exc)
    return StepReport(name=name, ok=False, error=f"{type(exc).__name__}: {exc}",
                      counts=counts, abandoned=abandoned)


def run(host: Host, stop: threading.Event, *, max_ticks: int | None = None,
        backlog_interval: float = BACKLOG_INTERVAL_SECONDS,
        on_tick: Callable[[TickReport], None] | None = None) -> TickReport | None:
    """Tick until ``stop`` is set or a step is abandoned: every ``[run]
    interval_seconds`` (read again each tick, so an edited config takes effect
    without a restart), or every ``backlog_interval`` seconds while a worker
    reports pending work. Returns the last report.

    Raises :class:`~hostcore.evidence.store.StoreError` after a tick when the
    store file was replaced or removed meanwhile (a restored backup, say): the
    process has the old file open and could only fail every tick from then on.
    """
    report = None
    ticks = 0
    while not stop.is_set():
        report = tick(host, stop)
        if on_tick is not None:
            on_tick(report)
        if host.store_replaced():
            # Loaded by now (the store is open); at the top it would put sqlite3 in a Host build.
            from hostcore.evidence.store import StoreError

            raise StoreError(f"{host.store.path}: the store file was replaced or removed "
                             "while hostcore ran; stopped so nothing more goes into the "
                             "old one (start it again to use the file there now)")
        ticks += 1
        if report.abandoned or (max_ticks is not None and ticks >= max_ticks):
            break  # an abandoned step holds the step lock until the process ends
        interval = host.reload_settings().run.interval_seconds
        stop.wait(min(interval, backlog_interval) if report.pending else interval)
    return report


def drain(host: Host, budget_seconds: float, stop: threading.Event | None = None,
          on_tick: Callable[[TickReport], None] | None = None) -> list[TickReport]:
    """Tick at once while a worker reports pending work, until ``budget_seconds``
    have passed (at least one tick) or a tick fails. What ``hostcore run --once``
    does, so one cron run drains a backlog instead of one slice of it, and a
    failure reaches cron at once instead of repeating for the whole budget."""
    deadline = time.monotonic() + budget_seconds
    reports: list[TickReport] = []
    while True:
        report = tick(host, stop)
        reports.append(report)
        if on_tick is not None:
            on_tick(report)
        if not report.pending or not report.ok or time.monotonic() >= deadline:
            return reports
        if stop is not None and stop.is_set():
            return reports


def save_last(root: Path, report: TickReport) -> None:
    """Keep ``report`` as the root's last tick (disposable: never fsynced)."""
    keep_report(root / LAST_TICK_FILE, report, "the last tick's report")


def load_last(root: Path) -> TickReport | None:
    """The last tick kept under ``root``; ``None`` when there is none or it is unreadable."""
    return read_report(root / LAST_TICK_FILE, TickReport)
