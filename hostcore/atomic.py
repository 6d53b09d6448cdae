"""Deprecated alias of :mod:`hostcore.files`."""

from hostcore._moved import alias

alias(__name__, "hostcore.files")
