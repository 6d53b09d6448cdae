"""hostcore's own ingest step and policy inputs pass the suites it imposes on plugins."""

from __future__ import annotations

import pytest

import hostcore.evidence.plugin as evidence_builtin
from hostcore.evidence.store import EvidenceRow, SourceBatch
from hostcore.plugin.markers import hookimpl
from hostcore.testing import PolicyInputConformance, WorkerConformance


class Backlog:
    """A source with more rows than one read returns (two per read)."""

    name = "backlog"

    def __init__(self, total: int = 9) -> None:
        self.total = total

    def read(self, cursor):
        start = int(cursor or 0)
        end = min(start + 2, self.total)
        rows = [EvidenceRow(partition="backlog", source_id="backlog", key=str(n),
                            payload={"n": n}) for n in range(start, end)]
        return SourceBatch(rows=rows, cursor=str(end), more=end < self.total)


class BacklogPlugin:
    @hookimpl
    def hostcore_sources(self, host):
        return Backlog()


class TestIngestStepConformance(WorkerConformance):
    """The ingest worker: pending while a source has more, resumable from cursors."""

    @pytest.fixture
    def plugin(self):
        return evidence_builtin

    @pytest.fixture
    def build_host(self, make_host, conformance_root):
        return lambda *extra: make_host(BacklogPlugin(), *extra, root=conformance_root)


class TestBuiltinPolicyInputsConformance(PolicyInputConformance):
    """The class list, the sync opt-out set and the ignore dotfiles."""

    @pytest.fixture
    def plugin(self):
        return evidence_builtin

    @pytest.fixture
    def sample_directories(self):
        return ("/home/someone/projects/secret-client", "/srv/work/payroll-service")

    @pytest.fixture
    def change_policy(self, sample_directories):
        def mark_local_only(host):
            class_list = next(p for p in host.policy_inputs if p.name == "class-list")
            class_list.set(sample_directories[0], "local-only")

        return mark_local_only
