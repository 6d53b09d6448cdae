"""Deprecated alias of :mod:`hostcore.export.freshness`."""

from hostcore._moved import alias

alias(__name__, "hostcore.export.freshness")
