"""The gh provider passes hostcore's provider conformance suite, against a fake gh."""

from __future__ import annotations

import hostcore_gh.plugin as gh_plugin
import pytest

from hostcore.testing import ProviderConformance


def issue(number: int) -> dict:
    return {"number": number, "title": f"Issue {number}", "state": "open",
            "html_url": f"https://github.com/o/r/issues/{number}",
            "updated_at": "2024-05-01T00:00:00Z", "labels": [{"name": "agent"}]}


class TestGhProviderConformance(ProviderConformance):
    @pytest.fixture
    def plugin(self):
        return gh_plugin

    @pytest.fixture
    def plugin_config(self):
        return {"plugins": {"gh": {"repos": ["o/r"]}}}

    @pytest.fixture
    def host_env(self, fake_gh):
        return fake_gh.env

    @pytest.fixture
    def seed_items(self, fake_gh):
        def seed(host):
            fake_gh.route("repos/o/r/issues", fake_gh.reply(200, [issue(1), issue(2)]),
                          query={"state": "open"})
            for number in (1, 2):
                fake_gh.route(f"repos/o/r/issues/{number}", fake_gh.reply(200, issue(number)))
        return seed

    @pytest.fixture
    def break_backend(self, fake_gh):
        def unplug(host):
            # GitHub answers every request with 404 from now on: nothing can be listed
            # or asked.
            (fake_gh.state_dir / "routes.json").write_text("[]")
        return unplug

    @pytest.fixture
    def foreign_ref(self):
        return "someone-else/repo#7"


class TestGhProviderConformanceWhenGhIsMissing(TestGhProviderConformance):
    """The backend breaks the hard way: the gh executable disappears."""

    @pytest.fixture
    def host_env(self, fake_gh):
        # Only the fake on PATH, so no other gh can answer once it is gone.
        return {**fake_gh.env, "PATH": str(fake_gh.bin_dir)}

    @pytest.fixture
    def break_backend(self, fake_gh):
        return lambda host: (fake_gh.bin_dir / "gh").unlink()
