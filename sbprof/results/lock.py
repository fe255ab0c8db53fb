"""One run per output folder: a lock that every exit releases, kill -9 included.

The lock is ``fcntl.flock`` on ``<folder>/.sbprof.lock``. The kernel drops a
flock when its process dies, however it dies, so a lock file left behind by
a killed run is simply locked again by the next run (taken over); the file
holds the holder's process id only so that a refused run can name it. The
file stays after a run: removing it would let a run that opened it just
before lock a file nobody else can see.
"""
from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Optional, Union

from sbprof.base.errors import SbprofError

LOCK_FILE = ".sbprof.lock"


class FolderInUse(SbprofError):
    """Another run holds the output folder."""


class FolderLock:
    """Hold ``folder`` for this process (a context manager); with ``wait``, wait for the holder to finish
    instead of refusing.

    Example
    -------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with FolderLock(folder) as lock:
    ...     lock.holder() == os.getpid()
    True
    """

    def __init__(self, folder: Union[str, Path], wait: bool = False):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.wait = wait
        self._fd: Optional[int] = None

    def holder(self) -> Optional[int]:
        """The process id written by the run that holds (or last held) the lock."""
        try:
            return int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self.holder()
            who = f"process {pid}" if pid else "another process"
            raise FolderInUse(f"output folder {str(self.folder)!r} is in use by another sbprof run ({who}); "
                              "wait for it to finish or choose another --output_folder") from None
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
