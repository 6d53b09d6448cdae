"""Deprecated alias of :mod:`hostcore.evidence.inputs`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.inputs")
