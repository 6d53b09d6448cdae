"""Decoding and encoding of msgspec records, with errors that name the input.

Records that are written to disk or cross a plugin boundary are ``msgspec.Struct``
types. Decoding tolerates unknown fields (a newer writer's record still reads),
and a malformed record raises :class:`~hostcore.errors.RecordError` naming what
was read and the field path inside it (``$.poll.lastPolledAt``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from hostcore.errors import RecordError

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def decode_json(data: bytes | str, type_: type[T], *, what: str) -> T:
    """Decode JSON ``data`` as ``type_``; ``what`` names the input in errors."""
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError as exc:
        raise RecordError(f"{what}: {exc}") from None


def convert(obj: Any, type_: type[T], *, what: str) -> T:
    """Convert already-parsed data (a dict from TOML, say) to ``type_``."""
    try:
        return msgspec.convert(obj, type=type_, strict=True)
    except msgspec.ValidationError as exc:
        raise RecordError(f"{what}: {exc}") from None


def encode_json(obj: Any) -> bytes:
    """Encode ``obj`` (Structs, dicts, lists, scalars) as compact JSON bytes."""
    return _encoder.encode(obj)
