"""BLAKE2b and SHA-256, taken from CPython's own modules rather than through hashlib.

``hashlib`` loads OpenSSL and lists its digests when first imported (2-6 ms of a cold
start: a hook, ``status``, a ``run --once`` that reads a new line or folds a policy
fingerprint), though CPython builds BLAKE2 and SHA-256 itself (``_blake2``;
``_sha256``, ``_sha2`` from 3.12), which ``hashlib`` falls back to; the digests are the
same bit for bit. An interpreter without those modules gets hashlib's.

Imports only the standard library: the hook's dispatcher, which must decide before
anything heavy loads, takes BLAKE2b from here.
"""

from __future__ import annotations

import sys

# typing is not imported: mypy reads this constant as typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the C modules have no stubs; hashlib's constructors are the same
    from hashlib import blake2b, sha256
else:
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    try:  # the one module this interpreter has (a failed import costs a path search)
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:
        from hashlib import sha256

__all__ = ["blake2b", "sha256"]
