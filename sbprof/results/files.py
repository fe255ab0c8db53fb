"""Files that survive crashes, full disks and shared machines.

- :func:`prepare_output_folder`: before anything is measured, the folder must
  exist or be creatable, be a folder, and take a file; one line says why not.
- :class:`SpaceReserve`: a few MiB held in the output folder, given back when
  a write finds the disk full, so the cell just measured is still saved.
"""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Union

from sbprof.base.errors import ConfigError
from sbprof.base.inputfiles import what_is_there

PathLike = Union[str, Path]
RESERVE_FILE = ".sbprof-reserve"
RESERVE_BYTES = 8 * 2**20
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def prepare_output_folder(folder: PathLike, key: str = "output_folder") -> Path:
    """Create ``folder`` if needed and check that a file can be written there.

    Raises
    ------
    ConfigError
        One line naming the folder and why it cannot hold results.

    Example
    -------
    >>> prepare_output_folder("/dev/null")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: output_folder '/dev/null' exists and is a character device, not a folder
    """
    if str(folder) == "":
        raise ConfigError(f"{key} is empty: give a folder for the results")
    path = Path(os.path.expanduser(str(folder)))
    there = what_is_there(path)
    if os.path.islink(path) and there.startswith("a symbolic link"):  # mkdir would call it a file in the way
        raise ConfigError(f"{key} {str(path)!r} cannot be used: it is {there}")
    if there not in ("a folder", "nothing") and not there.startswith(("a symbolic link", "unreadable")):
        raise ConfigError(f"{key} {str(path)!r} exists and is {there}, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{key} {str(path)!r} cannot be made: a part of its path is a file") from None
    except OSError as exc:
        why = "a symbolic link loop" if exc.errno == errno.ELOOP else exc.strerror
        raise ConfigError(f"{key} {str(path)!r} cannot be made: {why}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".sbprof-probe.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{key} {str(path)!r} is not writable: {exc.strerror}") from None
    return path.resolve()


class SpaceReserve:
    """Bytes held on the output folder's disk, to be given back when a write finds it full.

    Arguments
    ---------
    folder : path
        The output folder.
    size : int
        Bytes to hold (a results file is far smaller than the default 8 MiB).
    """

    def __init__(self, folder: PathLike, size: int = RESERVE_BYTES):
        self.path = Path(folder) / RESERVE_FILE
        self.size = size
        self.held = False

    def hold(self) -> bool:
        """Take the reserve (again); False when the disk cannot spare it now.

        Other failures (a folder that does not exist or cannot be written) raise :class:`OSError`;
        a file system without ``fallocate`` runs without a reserve (True, nothing held).
        """
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)
            finally:
                os.close(fd)
        except OSError as exc:
            self.release()
            if exc.errno in DISK_FULL:
                return False
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                return True
            raise
        self.held = True
        return True

    def require(self, key: str = "output_folder") -> None:
        """Take the reserve before a run, or stop it with one line naming the folder and the cause.

        Raises
        ------
        ConfigError
            The disk cannot spare the reserve, or the folder cannot hold files.
        """
        folder = str(self.path.parent)
        try:
            if self.hold():
                return
        except OSError as exc:
            raise ConfigError(f"{key} {folder!r} cannot hold results: {exc.strerror or exc}") from None
        raise ConfigError(f"{key} {folder!r}: its disk has less than {self.size // 2**20} MiB free; "
                          "free some space first")

    def release(self) -> bool:
        """Give the bytes back; True when there was something to give."""
        had = self.path.exists()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self.held = False
        return had
