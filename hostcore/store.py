"""Deprecated alias of :mod:`hostcore.evidence.store` (its schema constants are in
:mod:`hostcore.evidence.schema`, its time helpers in :mod:`hostcore.timestamps`)."""

from hostcore._moved import alias


def _format_ts() -> object:
    # Built only if a 0.1 caller asks for format_ts; the alias itself needs none of this.
    import functools

    from hostcore.timestamps import format_utc

    return functools.partial(format_utc, precision="micro")


alias(__name__, "hostcore.evidence.store", {
    "BUSY_TIMEOUT_MS": "hostcore.evidence.schema.BUSY_TIMEOUT_MS",
    "SCHEMA_VERSION": "hostcore.evidence.schema.VERSION",
    "parse_ts": "hostcore.timestamps.parse",
    "canonical_ts": "hostcore.timestamps.canonical",
    "format_ts": _format_ts,
})
