"""identity() and fold(): the only two hash definitions, pinned by known vectors."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostcore.export.ref import (
    ABSENT,
    ComponentConflict,
    Conflict,
    Ref,
    assert_component,
    fold,
    identity,
    sha256_hex,
)

# SHA-256 of no bytes: fold({}) claims "the set is empty".
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_identity_is_sha256_of_nul_joined_utf8_fields():
    expected = hashlib.sha256(b"owner/repo#1\x00closed\x00\xc3\xa9t\xc3\xa9").hexdigest()
    assert identity("owner/repo#1", "closed", "été") == expected


def test_identity_of_one_field_and_of_none():
    assert identity("abc") == hashlib.sha256(b"abc").hexdigest()
    assert identity() == EMPTY_SHA256


def test_identity_separates_fields():
    assert identity("ab", "c") != identity("a", "bc")
    assert identity("a", "") != identity("a")


def test_fold_of_nothing_is_the_digest_of_no_bytes_not_empty():
    assert fold({}) == EMPTY_SHA256
    assert fold({}) != ""


def test_fold_is_sha256_of_sorted_name_nul_hash_lf_lines():
    members = {"b": "22", "a": "11", "é": "33"}
    expected = hashlib.sha256(b"a\x0011\nb\x0022\n\xc3\xa9\x0033\n").hexdigest()
    assert fold(members) == expected


@given(st.binary(max_size=4096))
def test_the_sha256_without_openssl_is_hashlibs_bit_for_bit(data):
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_identities_and_folds_are_made_without_loading_openssl():
    # CPython's own SHA-256 module: hashlib would load OpenSSL (2-6 ms of a cold
    # status or run --once, which fold the export policy's fingerprint).
    code = ("import sys\n"
            "from hostcore.export.ref import fold, identity, sha256_hex\n"
            "print(identity('a', 'b'), fold({'a': 'b'}), sha256_hex(b'x'))\n"
            "print(sorted({'hashlib', '_hashlib'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert out[0].split() == [hashlib.sha256(b"a\x00b").hexdigest(),
                              hashlib.sha256(b"a\x00b\n").hexdigest(),
                              hashlib.sha256(b"x").hexdigest()]
    assert out[1] == "[]"


def test_an_interpreter_without_cpythons_sha256_module_hashes_through_hashlib():
    code = ("import sys\n"
            "sys.modules['_sha2'] = sys.modules['_sha256'] = None  # neither can import\n"
            "from hostcore.export.ref import fold, sha256_hex\n"
            "print(fold({'a': 'b'}), sha256_hex(b'x'), '_hashlib' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    assert out == [hashlib.sha256(b"a\x00b\n").hexdigest(), hashlib.sha256(b"x").hexdigest(),
                   "True"]


# Names and hashes as folds accept them: anything but the separators NUL and LF.
member_text = st.text(st.characters(blacklist_categories=("Cs",),
                                     blacklist_characters="\x00\n"))


@given(st.dictionaries(member_text, member_text, max_size=8), st.randoms())
def test_fold_does_not_depend_on_insertion_order(members, rnd):
    items = list(members.items())
    rnd.shuffle(items)
    assert fold(dict(items)) == fold(members)


def test_fold_changes_when_a_member_changes_or_is_added():
    base = {"a": identity("x")}
    assert fold(base) != fold({"a": identity("y")})
    assert fold(base) != fold({**base, "b": identity("x")})


def test_empty_expectation_asserts_nothing():
    assert_component("context", "", "anything")
    assert_component("decisions", "", "")


def test_matching_expectation_passes():
    assert_component("terms", "t1", "t1")


def test_moved_component_raises_a_conflict_that_reads_as_the_instruction():
    with pytest.raises(Conflict) as caught:
        assert_component("context", "c-expected", "c-found")
    conflict = caught.value
    assert (conflict.component, conflict.expected, conflict.actual) == (
        "context", "c-expected", "c-found"
    )
    message = str(conflict)
    assert message.startswith("context moved")
    assert "expected c-expected" in message and "found c-found" in message
    assert "Retrying the same write cannot resolve this" in message


def test_asserting_the_position_is_refused():
    with pytest.raises(ValueError, match="not a governance component"):
        assert_component("content", "1", "2")


@pytest.mark.parametrize("fields", [("a\x00b",), ("ok", "\x00"), ("\x00",)])
def test_identity_refuses_a_field_holding_its_separator(fields):
    # ("a\0b",) would otherwise hash exactly like ("a", "b").
    with pytest.raises(ValueError, match="NUL"):
        identity(*fields)


def test_identity_accepts_newlines_inside_a_field():
    assert identity("line one\nline two") == hashlib.sha256(b"line one\nline two").hexdigest()


@pytest.mark.parametrize("members", [
    {"a\x00b": "h"}, {"a": "h\x00"}, {"a\nb": "h"}, {"a": "h\nb\x00c"},
])
def test_fold_refuses_a_name_or_hash_holding_its_separators(members):
    # {"a": "h\nb\0c"} would otherwise fold exactly like {"a": "h", "b": "c"}.
    with pytest.raises(ValueError, match="NUL or a newline"):
        fold(members)


def test_a_conflict_names_every_component_the_stream_the_destination_and_the_attempt():
    conflict = Conflict.of(
        [ComponentConflict(component="context", expected="c-agreed", found="c-theirs",
                           attempted="c-mine"),
         ComponentConflict(component="decisions", expected=ABSENT, found="d-theirs",
                           attempted="d-mine")],
        stream="main", destination="directory")
    message = str(conflict)
    assert conflict.components == ["context", "decisions"]
    assert message.startswith("context and decisions moved at the destination 'directory' "
                              "(stream 'main'): ")
    for part in ("expected c-agreed, found c-theirs; this side tried to write c-mine",
                 "expected nothing yet, found d-theirs; this side tried to write d-mine"):
        assert part in message


def _raise_conflict() -> None:
    raise Conflict("terms", "t1", "t2", attempted="t3", stream="main", destination="folder")


def test_a_conflict_pickles_and_a_process_pool_reports_it():
    original = Conflict("context", "c1", "c2", attempted="c3", stream="s", destination="d",
                        more=[ComponentConflict(component="terms", expected="t1", found="t2")])
    copy = pickle.loads(pickle.dumps(original))
    assert (copy.conflicts, copy.stream, copy.destination, str(copy)) == (
        original.conflicts, "s", "d", str(original))
    context = multiprocessing.get_context("spawn")
    with (ProcessPoolExecutor(max_workers=1, mp_context=context) as pool,
          pytest.raises(Conflict) as caught):
        pool.submit(_raise_conflict).result(timeout=60)
    assert (caught.value.component, caught.value.expected, caught.value.actual) == (
        "terms", "t1", "t2")
    assert caught.value.conflicts[0].attempted == "t3"
    assert caught.value.destination == "folder"


@pytest.mark.parametrize("fields", [
    {"content": -1}, {"content": True}, {"content": "3"}, {"context": "c\x00"},
    {"terms": "t\n1"}, {"decisions": "d" * 257}, {"context": 5},
])
def test_a_ref_refuses_fields_that_are_not_a_position_or_an_identity(fields):
    with pytest.raises(ValueError, match="expected"):
        Ref(**fields)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(fields), type=Ref)


def test_a_ref_accepts_hashes_and_the_absent_expectation():
    assert Ref(content=3, context="a" * 64, terms=ABSENT, decisions="v2:x").content == 3


# -- where plugins hand over what is hashed ------------------------------------------


class SeparatorPart:
    """A policy input whose fingerprint part holds the fold's separator."""

    name = "separator-part"

    def fingerprint_part(self) -> str:
        return "part\nsmuggled\x00"

    def withholds(self, directory: str, source_id: str) -> bool:
        return directory == "/secret"


def test_a_policy_part_holding_a_separator_is_refused_and_reads_still_work():
    from hostcore.evidence.policy import UNAVAILABLE_PART, Policy

    policy = Policy([SeparatorPart()])
    assert policy.parts() == [("separator-part", UNAVAILABLE_PART)]
    assert policy.fingerprint() == fold({"separator-part": UNAVAILABLE_PART})
    assert policy.input_errors >= 1
    assert policy.withholds("/secret", "s") and not policy.withholds("/open", "s")


def test_an_event_with_a_control_character_in_a_name_or_enum_is_refused():
    from hostcore.errors import RegistrationError
    from hostcore.telemetry import Catalog, EventSpec

    catalog = Catalog()
    for spec in (EventSpec("acme.done", {"kind": ("a", "b\x00c")}),
                 EventSpec("acme.done", {"k\nk": int}),
                 EventSpec("acme\x00done", {})):
        with pytest.raises(RegistrationError, match="printable"):
            catalog.add(spec, owner="acme")


def test_an_opt_out_id_with_a_control_character_withholds_everything(tmp_path):
    from hostcore.evidence.inputs import SyncOptOut

    path = tmp_path / "sync-opt-out.json"
    path.write_text('["ok", "bad\\u0000id"]')
    opt_out = SyncOptOut(path)
    assert opt_out.fingerprint_part().startswith("unreadable:")
    assert opt_out.withholds("/any", "ok") and opt_out.withholds("/any", "other")
    assert "control character" in opt_out.status()["error"]
