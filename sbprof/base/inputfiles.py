"""Reading a file a user names (a configuration, a results file): a regular file, read up to a bound, or one line.

A name can point anywhere: at a folder, a FIFO that would block the read
forever, ``/dev/zero`` that never ends, or a symbolic link loop. The file is
opened without blocking, checked to be a regular file on the open
descriptor (so it cannot be swapped after the check), and read up to
``max_bytes`` whatever its size claims.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Union

from sbprof.base.errors import ConfigError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def what_is_there(path: Union[str, Path]) -> str:
    """What ``path`` is, in words, never following a link that leads nowhere: ``a folder``, ``a regular file``,
    ``a FIFO (named pipe)``..., ``a symbolic link loop``, ``a symbolic link to X, which does not exist`` or
    ``nothing``.

    Example
    -------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); os.symlink(os.path.join(d, "loop"), os.path.join(d, "loop"))
    >>> what_is_there(d), what_is_there(os.path.join(d, "loop")), what_is_there(os.path.join(d, "none"))
    ('a folder', 'a symbolic link loop', 'nothing')
    """
    try:
        return "a regular file" if stat.S_ISREG(mode := os.stat(path).st_mode) else _kind(mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)!r}, which does not exist"
        if exc.errno == errno.ENOENT:
            return "nothing"
        return f"unreadable ({exc.strerror or exc})"


def read_input_file(path: Union[str, Path], max_bytes: int, noun: str) -> bytes:
    """The bytes of the regular file ``path``; one :class:`ConfigError` line naming ``path`` for anything else.

    Example
    -------
    >>> read_input_file("/dev/zero", 1 << 20, "results file")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: /dev/zero: not a results file: it is a character device, not a regular file
    """
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise ConfigError(f"{name}: no such {noun}") from None
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{name}: a symbolic link loop, not a {noun}") from None
        raise ConfigError(f"{name}: the {noun} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{name}: not a {noun}: it is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise ConfigError(f"{name}: {info.st_size / 2**20:.1f} MiB is too large for a {noun} (the limit is "
                              f"{max_bytes / 2**20:g} MiB)")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"{name}: the {noun} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > max_bytes:  # it grew while being read
        raise ConfigError(f"{name}: more than {max_bytes / 2**20:g} MiB, too large for a {noun}")
    return b"".join(chunks)
