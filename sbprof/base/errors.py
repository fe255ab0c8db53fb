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


def failure_status(exc: BaseException) -> str:
    """``oom`` for out-of-memory errors (host or device), ``error`` for anything else.

    Read from the exception's type and message, so this module needs no torch.

    Example
    -------
    >>> failure_status(MemoryError()), failure_status(RuntimeError("CUDA out of memory.")), failure_status(KeyError("x"))
    ('oom', 'oom', 'error')
    >>> failure_status(RuntimeError("[enforce fail at alloc_cpu.cpp:121] DefaultCPUAllocator: can't allocate memory"))
    'oom'
    """
    if isinstance(exc, MemoryError) or any(c.__name__ == "OutOfMemoryError" for c in type(exc).__mro__):
        return "oom"
    text = str(exc).lower()
    if isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text):
        return "oom"
    return "error"
