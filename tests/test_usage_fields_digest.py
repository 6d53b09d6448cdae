"""A response's digest is a pure function of the ids that name it, whichever
response was digested just before (the last one is kept for runs of lines)."""

from __future__ import annotations

from hashlib import blake2b

from hostcore.evidence.usage_fields import response_digest


def expected(*parts: str) -> str:
    return blake2b("\0".join(parts).encode(), digest_size=12).hexdigest()


def test_a_run_of_lines_of_one_response_gets_one_digest():
    assert response_digest("msg_1", "req_1") == response_digest("msg_1", "req_1")
    assert response_digest("msg_1", "req_1") == expected("msg_1", "req_1")


def test_the_digest_kept_from_the_last_response_is_never_given_to_another():
    pairs = [("msg_1", "req_1"), ("msg_1", "req_2"), ("msg_1", "req_1"), ("msg_1\0req_1",),
             ("s", "2,3,4"), ("s", "2,3,4", ""), ("msg_2", "req_1")]
    assert [response_digest(*parts) for parts in pairs] == [expected(*p) for p in pairs]
    # Parts that join to the same text are the same response (as they always were).
    assert response_digest("msg_1\0req_1") == response_digest("msg_1", "req_1")
