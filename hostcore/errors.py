"""Exceptions the host raises. Each message names the input or plugin at fault."""


class HostcoreError(Exception):
    """Base class for every error hostcore raises on purpose."""


class ConfigError(HostcoreError):
    """The configuration file, a table in it, or a command-line value is invalid.

    The CLI turns this into exit status 2.
    """


class RecordError(HostcoreError):
    """A record read from disk or handed across a plugin boundary does not decode.

    The message names the record (usually its path) and the field path inside it.
    """


class PluginLoadError(HostcoreError):
    """A plugin failed to import, register or validate while strict loading is on."""


class RegistrationError(HostcoreError):
    """A plugin returned a registration object the host cannot accept."""


class TelemetryError(HostcoreError):
    """Code emitted an event that the catalog does not define, or with bad attributes.

    This is a programming error in the emitter, never the sink's fault.
    """
