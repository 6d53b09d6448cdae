"""The module paths of hostcore 0.1 still import, with a DeprecationWarning, and
still offer every public name they had (found where it lives now)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

# Public names of each 0.1 module (its TypeVars and OPT_OUT_TTL_SECONDS aside: the
# opt-out list is now re-read when its file changes, so that constant means nothing).
OLD_NAMES = {
    "conformance": ["DestinationConformance", "FOREIGN_REF", "KIT_ORIGIN", "MAX_READS",
                    "ODD_DIRECTORIES", "ODD_SOURCES", "PolicyInputConformance",
                    "ProviderConformance", "SourceConformance", "TelemetrySinkConformance",
                    "WorkerConformance", "contract_failure", "export_rows", "plugin_label",
                    "registered_objects", "require", "sample_events"],
    "ledger": ["INDEX_FORMAT", "SLUG_HASH_LENGTH", "SLUG_PREFIX_LENGTH", "TIME_FORMAT",
               "TRACKING", "decision_member", "format_utc", "parse_utc", "record_class"],
    "store": ["BUSY_TIMEOUT_MS", "SCHEMA_VERSION", "Store", "StoreError", "EvidenceRow",
              "canonical_ts", "format_ts", "parse_ts"],
    "transcripts": ["jsonl_files", "TranscriptSource", "Line", "FileState"],
}
ALIASES = ["atomic", "conformance", "freshness", "hookspecs", "ledger", "markers", "paths",
           "plugins", "policy", "policy_inputs", "poller", "ref", "refcache", "seam", "store",
           "transcripts", "types"]


@pytest.mark.parametrize("name", ALIASES)
def test_an_old_module_path_imports_with_a_deprecation_warning(name):
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            f"try:\n    import hostcore.{name}\nexcept DeprecationWarning as w:\n"
            "    print(w)\nelse:\n    print('no warning')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=60)
    assert f"hostcore.{name} moved to hostcore." in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("module", sorted(OLD_NAMES))
def test_an_old_module_still_offers_every_public_name_it_had(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module(f"hostcore.{module}")
    missing = [name for name in OLD_NAMES[module] if not hasattr(old, name)]
    assert not missing


def test_old_time_helpers_keep_their_0_1_results():
    from datetime import UTC, datetime

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import hostcore.ledger as ledger
        import hostcore.store as store
    moment = datetime(2026, 1, 2, 3, 4, 5, 600, tzinfo=UTC)
    assert ledger.format_utc(moment) == moment.strftime(ledger.TIME_FORMAT)
    assert ledger.parse_utc("2026-01-02T03:04:05Z") == moment.replace(microsecond=0)
    assert ledger.parse_utc("2026-01-02T03:04:05.6Z") is None
    assert store.format_ts(moment) == "2026-01-02T03:04:05.000600Z"
    assert store.canonical_ts("2026-01-02T03:04:05Z") == "2026-01-02T03:04:05.000000Z"


def test_monkeypatching_through_an_old_path_reaches_the_new_module(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import hostcore.store as old
    import hostcore.evidence.store as new

    monkeypatch.setattr(old, "WRITER_CACHE_KIB", 1)
    assert new.WRITER_CACHE_KIB == 1


def test_jsonl_files_lists_matching_files_as_0_1_did(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import hostcore.transcripts as old
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "b.jsonl").write_text("")
    (tmp_path / "p" / "a.jsonl").write_text("")
    (tmp_path / "p" / "c.txt").write_text("")
    found = old.jsonl_files(tmp_path, "p/*.jsonl")
    assert found == [("p/a.jsonl", tmp_path / "p" / "a.jsonl"),
                     ("p/b.jsonl", tmp_path / "p" / "b.jsonl")]
