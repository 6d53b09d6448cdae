"""Deprecated alias of :mod:`hostcore.evidence.store`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.store")
