"""Deprecated alias of :mod:`hostcore.workitems.ledger`."""

from hostcore._moved import alias

alias(__name__, "hostcore.workitems.ledger")
