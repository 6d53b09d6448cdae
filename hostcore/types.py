"""Deprecated alias of :mod:`hostcore.plugin.registration`."""

from hostcore._moved import alias

alias(__name__, "hostcore.plugin.registration")
