"""Deprecated alias of :mod:`hostcore.plugin.hookspecs`."""

from hostcore._moved import alias

alias(__name__, "hostcore.plugin.hookspecs")
