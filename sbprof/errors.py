"""One exception family for everything sbprof raises on purpose.

Each message names the key, file or value that is wrong, so a user never has
to read a traceback from deep inside torch or SpeechBrain.
"""


class SbprofError(Exception):
    """Base class of every error raised by sbprof on purpose."""


class ConfigError(SbprofError, ValueError):
    """A configuration (YAML key, argument, schedule number) is invalid."""


class MeasurementError(SbprofError, RuntimeError):
    """A measurement could not be taken or read (e.g. nothing was recorded)."""


class BackendUnavailable(SbprofError, RuntimeError):
    """A requested backend or device is not available on this machine."""
