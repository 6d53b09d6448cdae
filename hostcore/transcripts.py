"""Deprecated alias of :mod:`hostcore.evidence.transcripts`."""

from hostcore._moved import alias

alias(__name__, "hostcore.evidence.transcripts")
