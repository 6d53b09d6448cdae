"""Deprecated alias of :mod:`hostcore.plugin.loader`."""

from hostcore._moved import alias

alias(__name__, "hostcore.plugin.loader")
