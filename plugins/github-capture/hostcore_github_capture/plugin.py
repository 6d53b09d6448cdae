"""The ``github-capture`` plugin module, named by the distribution's entry point.

It registers nothing yet: the observed-repositories sidecar and the event capture
are added to it, with their hook implementations, as they are built.
"""
