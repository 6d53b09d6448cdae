"""Deprecated alias of :mod:`hostcore.workitems.poller`."""

from hostcore._moved import alias

alias(__name__, "hostcore.workitems.poller")
