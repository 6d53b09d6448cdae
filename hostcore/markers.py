"""Deprecated alias of :mod:`hostcore.plugin.markers`."""

from hostcore._moved import alias

alias(__name__, "hostcore.plugin.markers")
