"""The last step of confirmed deletions (the private unlink), run in batches, in parallel.

Unlinking a file whose blocks are on disk waits in the kernel: on an ext4 mounted
with ``discard`` about a millisecond, under load several, nearly all of it waiting
for the journal rather than using the CPU. ``os.unlink`` releases the GIL, and
unlinks waiting together share the wait, so a sweep hands that step of each
dependent's deletion (unlink the pin, drop its manifest) to an :class:`Unlinker`
and goes on with the next file. The steps are run in batches: once
:data:`BATCH_STEPS` are queued, and when the sweep drains the rest. The first step
of a batch runs in the draining thread and is timed: only when it waited longer
than :data:`SLOW_STEP_SECONDS` (the disk makes unlinks wait) do a few threads run
the rest of the batch together; otherwise it all runs there, since threads handing
the GIL to each other would cost more CPU than quick unlinks save (a handful of
steps always runs there). One batch per thread start, rather than a thread hand-off
per file, keeps what threads cost small where they do run.

The step handed over starts after the pin was validated and rechecked, exactly
where a deletion in one thread would unlink it. It touches only the private
folder: a failed unlink retains the pin with its manifest (``retained``, shown by
``custody status``) instead of putting it back, since the caller's custody of the
live path may be over by then, and the next recovery puts it back (or finishes it
when something newer lives there). A process killed with steps queued or running
leaves intent manifests and pins that :mod:`.recovery` takes up, as after a kill at
that step in one thread. Results are delivered in the thread that drains, in the
order the steps were handed over, so the caller's counts are never touched by two
threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

_R = TypeVar("_R")

# Threads running a batch: enough to overlap the kernel's waits, few enough that a
# 2-CPU machine's other work does not notice them.
UNLINK_WORKERS = 4
# Steps queued before a batch runs: bounds the descriptors the queued steps hold
# (one each) and the pins waiting in the private folders.
BATCH_STEPS = 64
# Batches this small run in the draining thread.
INLINE_STEPS = 4
# A batch whose first step took longer than this runs the rest in threads (seconds):
# a private unlink and manifest drop that do not wait take tens of microseconds.
SLOW_STEP_SECONDS = 0.0005


class Unlinker(Generic[_R]):
    """Queues steps and runs them in parallel batches; results go to each step's ``done``.

    Use as a context manager: leaving it drains what is queued.
    """

    def __init__(self, workers: int = UNLINK_WORKERS, batch: int = BATCH_STEPS,
                 slow_step: float = SLOW_STEP_SECONDS) -> None:
        self._workers = workers
        self._batch = batch
        self._slow_step = slow_step
        self._queued: list[tuple[Callable[[], _R], Callable[[_R], None]]] = []

    def submit(self, step: Callable[[], _R], done: Callable[[_R], None]) -> None:
        """Queue ``step``; ``done(result)`` is called in this thread once it has run
        (at the latest by :meth:`drain`)."""
        self._queued.append((step, done))
        if len(self._queued) >= self._batch:
            self.drain()

    def drain(self) -> None:
        """Run every queued step and call its ``done`` here, in the order queued, until
        nothing is queued (a ``done`` may queue more).

        Every step runs before an exception of one (a bug: steps turn OS errors into
        results) is raised, so nothing is left behind it; every ``done`` of a batch is
        called before one's exception is raised, so each can release what it holds.
        """
        failure: BaseException | None = None
        while self._queued:
            queued, self._queued = self._queued, []
            results = _run_all([step for step, _ in queued], self._workers,
                               self._slow_step)
            for (_, done), result in zip(queued, results, strict=True):
                try:
                    done(result)
                except BaseException as exc:  # raised once every done has run
                    failure = failure or exc
        if failure is not None:
            raise failure

    def __enter__(self) -> Unlinker[_R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.drain()


def _run_all(steps: list[Callable[[], _R]], workers: int, slow_step: float) -> list[_R]:
    """Every step's result, in order: run here, or when the first step was slow the
    rest spread over up to ``workers`` threads. Every step runs before the first
    exception of one is raised."""
    results: list[_R | None] = [None] * len(steps)
    failures: list[BaseException] = []

    def run(first: int, stride: int) -> None:
        for index in range(first, len(steps), stride):
            try:
                results[index] = steps[index]()
            except BaseException as exc:  # raised in the draining thread, below
                failures.append(exc)

    began = time.perf_counter()
    run(0, len(steps))  # the first step, timed
    if len(steps) <= INLINE_STEPS or time.perf_counter() - began <= slow_step:
        run(1, 1)
    else:
        # Strided, so each thread's share is spread over the batch.
        stride = min(workers, len(steps) - 1)
        threads: list[threading.Thread] = []
        for first in range(1, 1 + stride):
            thread = threading.Thread(target=run, args=(first, stride), name="custody-unlink")
            try:
                thread.start()
            except RuntimeError:  # no thread to be had: this share runs here
                run(first, stride)
                continue
            threads.append(thread)
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return results  # type: ignore[return-value]  # every slot was filled: no failure
