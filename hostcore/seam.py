"""Deprecated alias of :mod:`hostcore.evidence.seam`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.seam")
