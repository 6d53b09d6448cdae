"""The github-capture worker passes hostcore's worker conformance suite, against a fake gh."""

from __future__ import annotations

import hostcore_github_capture.plugin as capture_plugin
import pytest

from hostcore.evidence.store import EvidenceRow
from hostcore.testing import WorkerConformance

REPOS = ("octo/one", "octo/two", "octo/three")


class TestGithubCaptureWorkerConformance(WorkerConformance):
    @pytest.fixture
    def plugin(self):
        return capture_plugin

    @pytest.fixture
    def host_env(self, fake_gh):
        return fake_gh.env

    @pytest.fixture
    def seed_work(self, fake_gh, make_events):
        def seed(host):
            for repo in REPOS:
                fake_gh.repo(repo, make_events(repo, 3))
            host.store.append([
                EvidenceRow(partition="claude", source_id="claude", directory=f"/w/{n}",
                            git_remote=f"git@github.com:{repo}.git")
                for n, repo in enumerate(REPOS)])
        return seed
