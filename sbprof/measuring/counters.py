"""Kernel counters read many times a second at a few microseconds each: a ``/proc`` file held open.

Opening, reading and closing a ``/proc`` file costs about 30 µs here, as
much as psutil's ``memory_info()``; reading it again through a descriptor
held open (``os.pread`` at offset 0: the kernel writes the file anew on
every read) costs about 3 µs. The stream job's server reads the thread's
wait for a core twice and the process's memory once per chunk, between the
model's calls: at 30 µs a read that was busy time a real server would not
spend (issue 44: 0.1 ms per chunk against an outside loop's 0.02 ms).

:func:`core_wait` and :func:`resident_memory` open a :class:`Counter`;
:meth:`Counter.read` gives ``None`` where the system does not say (no such
file, another kernel's format), never an exception.

Example
-------
>>> with core_wait() as waited, resident_memory() as rss:
...     w, r = waited.read(), rss.read()
>>> (w is None or w >= 0.0, r is None or r > 0)
(True, True)
"""
from __future__ import annotations

import os
from typing import Optional


class Counter:
    """One whitespace-separated field of a ``/proc`` file times ``scale``, read through a descriptor held open.

    The descriptor names the file of the thread that opened it (``/proc/thread-self`` resolves when opened):
    open a thread's counter in that thread.
    """

    def __init__(self, path: str, field: int, scale: float = 1):
        self.field, self.scale = field, scale
        try:
            self.fd: Optional[int] = os.open(path, os.O_RDONLY)
        except OSError:
            self.fd = None

    def read(self) -> Optional[float]:
        if self.fd is None:
            return None
        try:
            return int(os.pread(self.fd, 256, 0).split()[self.field]) * self.scale
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "Counter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def core_wait() -> Counter:
    """Seconds the calling thread has waited for a core since it started (``/proc/thread-self/schedstat``, its
    second field: time runnable but not running, in ns)."""
    return Counter("/proc/thread-self/schedstat", 1, 1e-9)


def resident_memory() -> Counter:
    """The process's resident set in bytes (``/proc/self/statm``, its second field, in pages)."""
    return Counter("/proc/self/statm", 1, os.sysconf("SC_PAGE_SIZE"))
