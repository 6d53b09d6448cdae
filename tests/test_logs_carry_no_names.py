"""Warning and info log lines carry kinds and counts, never repository names or paths.

Exception messages do name them (a provider's 404 names the ref, an OSError the
path), so the host logs only the exception's kind at INFO and above; the text is
for -vv (DEBUG), where a user diagnosing their own machine asked for it.
"""

from __future__ import annotations

import logging

from hostcore import hookimpl
from hostcore.workitems.items import ProviderError

SECRET_REPO = "acme-corp/secret-merger-repo"
SECRET_PATH = "/home/someone/clients/secret-merger"


class ExplodingSource:
    name = "exploding"

    def read(self, cursor):
        raise OSError(f"cannot read {SECRET_PATH}/session.jsonl")


class UnlistableProvider:
    name = "unlistable"

    def owns(self, ref):
        return True

    def scope_of(self, ref):
        return SECRET_REPO

    def list_items(self):
        raise ProviderError(f"{SECRET_REPO}: rate limited", scope=SECRET_REPO)

    def closure(self, ref):
        raise ProviderError(f"{SECRET_REPO}#1: not found", ref=f"{SECRET_REPO}#1")


class Plugin:
    @hookimpl
    def hostcore_sources(self, host):
        return ExplodingSource()

    @hookimpl
    def hostcore_providers(self, host):
        return UnlistableProvider()


def test_failing_source_and_provider_log_no_names_above_debug(make_host, caplog):
    host = make_host(Plugin())
    with caplog.at_level(logging.DEBUG):
        report = host.tick()
    assert report.steps, "the tick ran its steps"
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert any("exploding" in m for m in loud), "the source failure was reported"
    assert any("unlistable" in m for m in loud), "the listing failure was reported"
    for message in loud:
        assert "secret" not in message, message
    quiet = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert SECRET_REPO in quiet  # the detail is still there for -vv
