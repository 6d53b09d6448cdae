"""Deprecated alias of :mod:`hostcore.export.ref`."""

from hostcore._moved import alias

alias(__name__, "hostcore.export.ref")
