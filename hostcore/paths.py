"""Deprecated alias of :mod:`hostcore.evidence.paths`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.paths")
