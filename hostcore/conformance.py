"""Deprecated alias of :mod:`hostcore.testing.kit`."""

from hostcore._moved import alias

alias(__name__, "hostcore.testing.kit")
