"""Deprecated alias of :mod:`hostcore.evidence.policy`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.policy")
