"""The conformance suite for evidence sources (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hostcore.plugin.registration import KINDS, validate
from hostcore.testing.kit import _PluginSuite, contract_failure, registered_objects, require

# Reads the kit follows a cursor chain for before calling a source endless.
MAX_READS = 1_000


class SourceConformance(_PluginSuite):
    """Checks every evidence source the plugin registers.

    Contract: ``read(cursor)`` returns a :class:`~hostcore.evidence.store.SourceBatch` of
    :class:`~hostcore.evidence.store.EvidenceRow`; reading on from the cursor it returned
    gives nothing already given (so ingesting the same input twice adds nothing,
    across restarts too); new input after the cursor arrives exactly once; and
    malformed input neither raises nor stops later input from arriving.

    Fixtures to provide: ``plugin``; ``add_evidence`` returning a callable
    ``(host) -> None`` that adds one piece of valid input (an appended line, a new
    file); ``add_malformed`` returning one that adds malformed input (a line that
    is not JSON, a truncated file).
    """

    max_reads = MAX_READS

    @pytest.fixture
    def add_evidence(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs an `add_evidence` fixture returning a callable "
            "(host) -> None that adds one piece of valid input for your source.")

    @pytest.fixture
    def add_malformed(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs an `add_malformed` fixture returning a callable "
            "(host) -> None that adds malformed input for your source.")

    def _read(self, source: Any, cursor: str | None) -> Any:
        # Loaded with hostcore's pytest plugin in every pytest run: rows load only when used.
        from hostcore.evidence.rows import EvidenceRow, SourceBatch

        try:
            batch = source.read(cursor)
        except Exception as exc:
            contract_failure(f"source {source.name!r}: read({cursor!r}) raised; the host "
                             "would skip this source every tick until its input changes. "
                             "Skip (and count) what you cannot read instead.", raised=exc)
        require(isinstance(batch, SourceBatch),
                f"source {source.name!r}: read() returned {type(batch).__name__}; it must "
                "return hostcore.evidence.store.SourceBatch(rows=[EvidenceRow(...)], cursor=...).")
        require(batch.cursor is None or isinstance(batch.cursor, str),
                f"source {source.name!r}: the batch cursor is {type(batch.cursor).__name__}; "
                "it must be a str (or None before any input).")
        wrong = [type(r).__name__ for r in batch.rows if not isinstance(r, EvidenceRow)]
        require(not wrong, f"source {source.name!r}: batch rows include {sorted(set(wrong))}; "
                           "every row must be hostcore.evidence.store.EvidenceRow.")
        return batch

    def _drain(self, source: Any, cursor: str | None) -> tuple[list[Any], str | None]:
        rows: list[Any] = []
        for _ in range(self.max_reads):
            batch = self._read(source, cursor)
            rows.extend(batch.rows)
            cursor = batch.cursor
            if not batch.rows and not batch.more:
                return rows, cursor
        contract_failure(f"source {source.name!r} still returned rows after {self.max_reads} "
                         "reads with no new input: read(cursor) must move past what it "
                         "returned.")

    @pytest.fixture
    def source_host(self, build_host: Callable[..., Any]) -> Any:
        return build_host()

    @pytest.fixture
    def sources(self, source_host: Any, plugin: object) -> list[Any]:
        return registered_objects(source_host, plugin, "source")

    def test_source_is_a_valid_registration(self, sources: list[Any]) -> None:
        for source in sources:
            try:
                validate(KINDS["source"], source, "the source")
            except Exception as exc:
                contract_failure(str(exc))

    def test_reading_on_from_the_returned_cursor_gives_nothing_twice(
            self, source_host: Any, sources: list[Any], add_evidence: Any) -> None:
        add_evidence(source_host)
        add_evidence(source_host)
        for source in sources:
            rows, cursor = self._drain(source, None)
            require(rows, f"source {source.name!r}: add_evidence added input twice but read() "
                          "returned no row; make add_evidence write what the source reads.")
            again = self._read(source, cursor)
            require(not again.rows,
                    f"source {source.name!r}: reading again from the cursor it returned gave "
                    f"{len(again.rows)} row(s) it had already given; the cursor must move "
                    "past every row returned.")

    def test_new_input_after_the_cursor_arrives_once(
            self, source_host: Any, sources: list[Any], add_evidence: Any) -> None:
        add_evidence(source_host)
        cursors = {s.name: self._drain(s, None)[1] for s in sources}
        add_evidence(source_host)
        for source in sources:
            fresh, cursor = self._drain(source, cursors[source.name])
            require(fresh, f"source {source.name!r}: input added after the cursor was not "
                           "returned by read(cursor).")
            require(not self._read(source, cursor).rows,
                    f"source {source.name!r}: the new input was returned twice.")

    def test_ingesting_twice_adds_nothing_even_after_a_restart(
            self, source_host: Any, sources: list[Any], add_evidence: Any,
            build_host: Callable[..., Any]) -> None:
        add_evidence(source_host)
        first = self._tick_rows(source_host)
        require(first > 0, "the ingest step appended no row from input add_evidence added; "
                           "check the source reads where add_evidence writes.")
        require(self._tick_rows(source_host) == 0,
                "a second tick over the same input appended rows again; the source must "
                "return a cursor past every row it returned.")
        require(self._tick_rows(build_host()) == 0,
                "a restarted host over the same root appended rows again; persist progress "
                "only through the cursor you return (the host stores it with the rows).")

    @staticmethod
    def _tick_rows(host: Any) -> int:
        before = sum(v.row_count for v in host.store.partitions().values())
        report = host.tick()
        failed = [(s.name, s.error) for s in report.steps if not s.ok]
        require(not failed, f"tick steps failed: {failed}")
        after = sum(v.row_count for v in host.store.partitions().values())
        return int(after - before)

    def test_malformed_input_neither_raises_nor_blocks_later_input(
            self, source_host: Any, sources: list[Any], add_evidence: Any,
            add_malformed: Any) -> None:
        add_evidence(source_host)
        cursors = {s.name: self._drain(s, None)[1] for s in sources}
        add_malformed(source_host)
        add_evidence(source_host)
        for source in sources:
            rows, _ = self._drain(source, cursors[source.name])
            require(rows, f"source {source.name!r}: valid input added after malformed input "
                          "never arrived; skip what is malformed (and say so) and read on.")
