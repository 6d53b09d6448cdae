"""The pluggy markers for the ``hostcore`` project name.

Plugins decorate their hook implementations with :data:`hookimpl`; the host's
hook specifications in :mod:`hostcore.plugin.hookspecs` use :data:`hookspec`.
"""

import pluggy

PROJECT_NAME = "hostcore"
ENTRY_POINT_GROUP = "hostcore"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
