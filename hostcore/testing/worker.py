"""The conformance suite for workers (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from hostcore.plugin.registration import KINDS, WorkerResult, availability, validate
from hostcore.testing.kit import (
    MAX_RUNS_TO_DRAIN,
    _PluginSuite,
    contract_failure,
    registered_objects,
    require,
)


class WorkerConformance(_PluginSuite):
    """Checks every worker the plugin registers.

    Contract: ``run(host)`` returns a :class:`~hostcore.plugin.registration.WorkerResult` whose
    counts are non-negative integers; ``pending=True`` means more work is ready
    now, so runs with no new input drain it in a bounded number of runs and then
    report ``pending=False``; and the worker is resumable: a host restarted over
    the same root (a fresh plugin registration, nothing kept in memory) carries on
    and drains too. Override ``seed_work`` to give the worker a backlog.
    """

    max_runs_to_drain = MAX_RUNS_TO_DRAIN

    @pytest.fixture
    def seed_work(self) -> Callable[[Any], None]:
        """Return a callable that gives the worker(s) in ``host`` a backlog."""
        return lambda host: None

    def _run(self, host: Any, worker: Any) -> WorkerResult:
        reason = availability(worker)
        require(reason is None,
                f"worker {worker.name!r} is unavailable ({reason}), so the host would skip it "
                "and there is nothing to check; give the suite what it needs through "
                "`plugin_config`, `host_env` or `seed_work`.")
        try:
            with host.step_lock():
                result = worker.run(host)
        except Exception as exc:
            contract_failure(f"worker {worker.name!r}: run() raised; the tick would report "
                             "this step failed.", raised=exc)
        require(isinstance(result, WorkerResult),
                f"worker {worker.name!r}: run() returned {type(result).__name__}; it must "
                "return hostcore.plugin.registration.WorkerResult(pending=..., counts={...}).")
        bad = {k: v for k, v in result.counts.items()
               if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int)
               or v < 0}
        require(not bad, f"worker {worker.name!r}: counts must map names to non-negative "
                         f"integers (never names or paths); got {bad}")
        return cast(WorkerResult, result)

    def _drain(self, runs: Callable[[], tuple[Any, Any]], hint: str = "") -> int:
        """Run until no worker reports pending; return the runs taken."""
        for attempt in range(1, self.max_runs_to_drain + 1):
            host, workers = runs()
            pending = [w.name for w in workers if self._run(host, w).pending]
            if not pending:
                return attempt
        contract_failure(
            f"worker(s) {pending} still reported pending=True after {self.max_runs_to_drain} "
            "runs with no new input. pending=True must mean more work is ready now, and each "
            f"run must make progress, or the host ticks at the backlog cadence forever.{hint}")

    def test_worker_is_a_valid_registration(self, build_host: Callable[..., Any],
                                            plugin: object) -> None:
        for worker in registered_objects(build_host(), plugin, "worker"):
            try:
                validate(KINDS["worker"], worker, "the worker")
            except Exception as exc:
                contract_failure(str(exc))
            order = getattr(worker, "order", 100)
            require(isinstance(order, int) and not isinstance(order, bool),
                    f"worker {worker.name!r}: order must be an int, got {order!r}")

    def test_run_returns_a_worker_result_of_counts(self, build_host: Callable[..., Any],
                                                   plugin: object, seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        for worker in registered_objects(host, plugin, "worker"):
            self._run(host, worker)

    def test_pending_work_drains_and_then_stays_drained(
            self, build_host: Callable[..., Any], plugin: object, seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        workers = registered_objects(host, plugin, "worker")
        self._drain(lambda: (host, workers))
        for worker in workers:
            require(not self._run(host, worker).pending,
                    f"worker {worker.name!r} reported pending=False, then pending=True on "
                    "the next run with no new input: pending must say whether work is ready.")

    def test_a_restarted_host_resumes_and_drains(self, build_host: Callable[..., Any],
                                                 plugin: object, seed_work: Any) -> None:
        seed_work(build_host())

        def fresh() -> tuple[Any, Any]:
            host = build_host()  # a restart: new host, new registrations, same root
            return host, registered_objects(host, plugin, "worker")

        self._drain(fresh, hint=" Here every run was a restarted host over the same root: "
                                "progress must be kept under the host root, not in memory.")
        host, workers = fresh()
        for worker in workers:
            require(not self._run(host, worker).pending,
                    f"worker {worker.name!r}: after draining, a restarted host found pending "
                    "work again; progress must be kept under the host root, not in memory.")

    def test_worker_runs_as_a_tick_step(self, build_host: Callable[..., Any], plugin: object,
                                        seed_work: Any) -> None:
        host = build_host()
        seed_work(host)
        names = {w.name for w in registered_objects(host, plugin, "worker")}
        report = host.tick()
        failed = [s for s in report.steps if s.name in names and not s.ok]
        require(not failed, f"tick steps failed: {[(s.name, s.error) for s in failed]}")
