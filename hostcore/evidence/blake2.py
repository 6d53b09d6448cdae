"""BLAKE2b, loaded without OpenSSL.

``hashlib`` loads OpenSSL and lists its digests when first imported (2-3 ms of a
cold start, paid by every ``run --once`` that reads a new line), though CPython's
BLAKE2 is its own ``_blake2`` module, which ``hashlib`` only re-exports. Evidence
keys and digests use BLAKE2b alone, so they take it from here.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # an interpreter without CPython's module
    from hashlib import blake2b

__all__ = ["blake2b"]
