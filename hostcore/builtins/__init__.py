"""The host's own plugins. They register through the same hooks as third parties.

Each module here is a pluggy plugin module; :data:`BUILTIN_PLUGINS` lists them in
load order. They cannot be disabled.
"""

BUILTIN_PLUGINS: tuple[str, ...] = (
    "hostcore.builtins.core",
    "hostcore.builtins.evidence",
    "hostcore.builtins.export",
    "hostcore.builtins.poll",
    "hostcore.builtins.scaffold",
)
