"""The ref cache: destination-keyed, disposable, bound to the store."""

from __future__ import annotations

import msgspec
import pytest

from hostcore.export.ref import ComponentConflict, Ref
from hostcore.export.refcache import CACHE_PATH, CachedRefs, RefCache

GOVERNED = Ref(content=40, context="c1", terms="t1", decisions="d1")


def saved(root, destination="dir:/a", store="store-1", ref=GOVERNED) -> RefCache:
    cache = RefCache(root)
    cached = cache.load(destination)
    cached.bind_store(store)
    cached.record("main", ref)
    cache.save(cached)
    return cache


def test_round_trip_for_the_same_destination(tmp_path):
    cache = saved(tmp_path)
    loaded = cache.load("dir:/a")
    assert loaded.ref("main") == GOVERNED
    assert loaded.store == "store-1"
    assert (tmp_path / CACHE_PATH).is_file()


def test_another_destinations_cache_is_discarded_not_reconciled(tmp_path):
    cache = saved(tmp_path, destination="dir:/a")
    other = cache.load("dir:/b")
    assert other == CachedRefs(destination="dir:/b")
    assert other.ref("main") == Ref()
    # Loading for another destination does not touch the file; saving replaces it.
    assert cache.load("dir:/a").ref("main") == GOVERNED
    cache.save(other)
    assert cache.load("dir:/a").ref("main") == Ref()


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff\xfegarbage", b"", b"{not json", b"[]", b'{"streams": {}}',
     b'{"destination": "dir:/a", "streams": {"main": {"content": "x"}}}', "\udcff"],
)
def test_unreadable_file_loads_as_empty(tmp_path, content):
    path = tmp_path / CACHE_PATH
    path.parent.mkdir(parents=True)
    if isinstance(content, str):
        content = content.encode("utf-8", "surrogateescape")
    path.write_bytes(content)
    cache = RefCache(tmp_path)
    assert cache.load("dir:/a") == CachedRefs(destination="dir:/a")
    assert cache.load_observed().ref() == Ref()
    assert path.read_bytes() == content  # never repaired in place


def test_missing_file_loads_as_empty(tmp_path):
    assert RefCache(tmp_path).load("dir:/a").streams == {}


def test_store_identity_change_drops_positions_and_keeps_identities(tmp_path):
    cache = saved(tmp_path, store="store-1")
    cached = cache.load("dir:/a")
    cached.record("side", Ref(content=7, terms="t9"))
    assert cached.bind_store("store-1") is False
    assert cached.ref("main") == GOVERNED
    assert cached.bind_store("store-2") is True
    assert cached.ref("main") == Ref(context="c1", terms="t1", decisions="d1")
    assert cached.ref("side") == Ref(terms="t9")
    assert cached.store == "store-2"


def test_binding_a_cache_that_recorded_no_store_drops_its_positions(tmp_path):
    cached = CachedRefs(destination="d", streams={"main": GOVERNED})
    assert cached.bind_store("store-1") is True
    assert cached.ref().content == 0 and cached.ref().context == "c1"


def test_load_observed_reads_any_destination_but_cannot_be_saved(tmp_path):
    cache = saved(tmp_path, destination="dir:/a")
    observed = cache.load_observed()
    assert observed.destination == "dir:/a"
    assert observed.ref("main") == GOVERNED
    with pytest.raises(TypeError, match="load"):
        cache.save(observed)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        observed.destination = "x"  # type: ignore[misc]


def test_file_is_plain_json_with_the_ref_wire_names(tmp_path):
    saved(tmp_path)
    data = msgspec.json.decode((tmp_path / CACHE_PATH).read_bytes())
    assert data == {
        "destination": "dir:/a",
        "store": "store-1",
        "instance": "",
        "streams": {"main": {"content": 40, "context": "c1", "terms": "t1", "decisions": "d1"}},
        "published": {},
        "conflicts": {},
    }


def test_another_instance_of_the_destination_drops_everything_recorded(tmp_path):
    cache = saved(tmp_path)
    cached = cache.load("dir:/a")
    assert cached.bind_instance("") is False  # recorded before instances: unchanged so far
    cached.observe("main", Ref(content=3, context="c9"))
    cached.record_conflicts("main", [ComponentConflict(component="context", expected="c1",
                                                       found="c9", attempted="c2")])
    assert cached.bind_instance("instance-1") is True
    assert (cached.streams, cached.published, cached.conflicts) == ({}, {}, {})
    cached.record("main", GOVERNED)
    assert cached.bind_instance("instance-1") is False
    assert cached.ref("main") == GOVERNED


def test_a_standing_conflict_is_new_only_once(tmp_path):
    cached = RefCache(tmp_path).load("dir:/a")
    moved = ComponentConflict(component="terms", expected="t1", found="t9", attempted="t2")
    assert cached.record_conflicts("main", [moved]) == [moved]
    assert cached.record_conflicts("main", [moved]) == []
    again = msgspec.structs.replace(moved, attempted="t3")  # this side changed again
    assert cached.record_conflicts("main", [again]) == [again]
    assert cached.record_conflicts("main", []) == []
    assert cached.conflicts == {}


def test_observed_reads_what_the_destination_published_apart_from_what_was_agreed(tmp_path):
    cache = RefCache(tmp_path)
    cached = cache.load("dir:/a")
    cached.record("main", Ref(content=4, context="c1"))
    cached.observe("main", Ref(content=9, context="c-other-writer"))
    cache.save(cached)
    observed = cache.load_observed()
    assert observed.ref("main") == Ref(content=4, context="c1")
    assert observed.published_ref("main") == Ref(content=9, context="c-other-writer")


def test_a_folder_at_the_cache_path_is_reported_not_raised(tmp_path, caplog):
    (tmp_path / CACHE_PATH).mkdir(parents=True)
    cache = RefCache(tmp_path)
    assert cache.load("dir:/a") == CachedRefs(destination="dir:/a")
    assert cache.save(cache.load("dir:/a")) is False
    assert cache.problem() == "something other than a file is at its path"
    assert "IsADirectoryError" in caplog.text and str(tmp_path) not in caplog.text
    assert RefCache(tmp_path / "elsewhere").problem() is None
