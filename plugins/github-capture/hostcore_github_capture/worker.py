"""The ``github-capture`` worker: the sidecar tick, then the capture step, once per tick."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from hostcore.plugin.registration import WorkerResult

if TYPE_CHECKING:
    from hostcore.host import Host
    from hostcore_github_capture.capture import Capturer
    from hostcore_github_capture.sidecar import Sidecar
    from hostcore_github_capture.state import CaptureState, StateFile

PLUGIN_NAME = "github-capture"
# After the ingest step (sources), so a tick's new evidence is seen the same tick.
WORKER_ORDER = 30


class CaptureConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``[plugins.github-capture]``: ``gh`` is the GitHub CLI to run;
    ``revalidate_by`` is what a revalidation pass reads, ``tuples`` (each
    distinct directory, source and remote; the default) or ``rows`` (each
    history row)."""

    gh: str = "gh"
    revalidate_by: Literal["rows", "tuples"] = "tuples"


class CaptureWorker:
    """Keeps the inventory current, then captures events for it.

    The capture step runs only after the sidecar tick succeeded in the same
    step, so it always sees the inventory as this tick left it: a pass started
    this tick already limits capture to what it confirmed. If the sidecar tick
    fails, the step fails and nothing is captured.

    Everything is built on first use: registering the worker opens no store.
    ``runner``, ``clock``, the budgets and the pass ``unit`` (else from the
    config) are injectable for tests.
    """

    name = PLUGIN_NAME
    order = WORKER_ORDER

    def __init__(self, host: Host, *, runner: Any = None, clock: Callable[[], float] = time.time,
                 row_budget: int | None = None, request_budget: int | None = None,
                 tuple_budget: int | None = None, unit: str | None = None) -> None:
        self.host = host
        self._runner = runner
        self.clock = clock
        self.row_budget = row_budget
        self.request_budget = request_budget
        self.tuple_budget = tuple_budget
        self.unit = unit

    @cached_property
    def sidecar(self) -> Sidecar:
        from hostcore_github_capture.sidecar import Sidecar
        from hostcore_github_capture.state import SIDECAR_FILE, SidecarState, StateFile

        state = StateFile(self.host.state_dir(PLUGIN_NAME) / SIDECAR_FILE, SidecarState)
        extra: dict[str, Any] = {"unit": self.unit or self.config.revalidate_by}
        if self.row_budget is not None:
            extra["row_budget"] = self.row_budget
        if self.tuple_budget is not None:
            extra["tuple_budget"] = self.tuple_budget
        return Sidecar(self.host.store, self.host.seam, state, self.host.emit,
                       clock=self.clock, **extra)

    @cached_property
    def capturer(self) -> Capturer:
        from hostcore_github_capture.capture import Capturer

        extra = {} if self.request_budget is None else {"request_budget": self.request_budget}
        return Capturer(self.runner, self.host.store, self.capture_state, self.host.emit,
                        clock=self.clock, **extra)

    @cached_property
    def capture_state(self) -> StateFile[CaptureState]:
        """The capture step's state file (readable without loading the capture code)."""
        from hostcore_github_capture.state import CAPTURE_FILE, CaptureState, StateFile

        return StateFile(self.host.state_dir(PLUGIN_NAME) / CAPTURE_FILE, CaptureState)

    @cached_property
    def runner(self) -> Any:
        if self._runner is not None:
            return self._runner
        from hostcore_gh.runner import GhRunner

        return GhRunner(self.config.gh, env=self.host.env)

    @cached_property
    def config(self) -> CaptureConfig:
        return self.host.plugin_config(PLUGIN_NAME, CaptureConfig)

    def run(self, host: Host) -> WorkerResult:
        tick = self.sidecar.tick()
        inventory, ignored = self.sidecar.capture_set()
        keep = self.sidecar.known()
        counts = {
            "positions_read": tick.positions_read,
            "rows_read": tick.rows_read,
            "tuples_read": tick.tuples_read,
            "capturing": len(inventory),
            "requests": 0,
            "events_stored": 0,
        }
        if not (inventory or keep or self.capture_state.path.exists()):
            # No repository yet and no polling state to prune: nothing to step,
            # and a root without GitHub evidence never loads the capture code.
            return WorkerResult(pending=tick.pending, counts=counts)
        captured = self.capturer.step(inventory, ignored=ignored, keep=keep)
        counts["requests"] = captured.requests
        counts["events_stored"] = captured.events_stored
        return WorkerResult(pending=tick.pending or captured.pending, counts=counts)

    def report(self) -> dict[str, Any]:
        """What ``hostcore capture status`` shows (its keys are listed in
        :mod:`hostcore_github_capture.commands`).

        Here, not in the commands module: ``hostcore status`` asks every worker, and
        a cold status must not import the capture commands to answer.
        """
        from hostcore_github_capture.sidecar import derivation_ahead
        from hostcore_github_capture.stamps import ahead
        from hostcore_github_capture.state import MAX_BACKOFF_SECONDS

        sidecar = self.sidecar
        state = sidecar.state.load()
        now = self.clock()
        capturing, _ = sidecar.capture_set()
        progress = sidecar.progress()
        backoff = self.capture_state.load().backoff_until
        if ahead(backoff, now, horizon=MAX_BACKOFF_SECONDS):
            backoff = 0.0  # a wrong clock's: the next step ignores it
        age: int | None = None
        if state.derived_at is not None:
            # Within the tolerance a stamp slightly ahead is "just now"; beyond it, say so.
            age = int(now - state.derived_at) if derivation_ahead(state, now) \
                else max(0, int(now - state.derived_at))
        return {
            "inventory": len(state.repos),
            "capturing": len(capturing),
            "ignored": len(state.ignore),
            "revalidation": None if progress is None else msgspec.to_builtins(progress),
            "last_derivation_age_seconds": age,
            "pending": sidecar.pending(),
            "rate_limited_for_seconds": max(0, int(backoff - now)),
        }

    def status(self) -> dict[str, object]:
        """Counts for ``hostcore status`` (the same as ``hostcore capture status``)."""
        report = self.report()
        revalidation = report.pop("revalidation")
        if revalidation is not None:
            report.update({f"revalidation_{k}": v for k, v in revalidation.items()})
        return report
