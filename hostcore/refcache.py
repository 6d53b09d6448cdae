"""Deprecated alias of :mod:`hostcore.export.refcache`."""

from hostcore._moved import alias

alias(__name__, "hostcore.export.refcache")
