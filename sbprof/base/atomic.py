"""Files written whole: readers see the old file or the new one, never a mix, with the permissions the user's umask
gives any new file (a bare temporary file would be 0600). A primitive every layer may use (results files, a FLOP
peak's cache, a cluster's ledger), so it sits at the bottom.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union

PathLike = Union[str, Path]


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # the only portable read is a write; put it straight back
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a new file gets from ``open()`` under this process's umask (e.g. 0o644).

    Example
    -------
    >>> 0o600 <= new_file_mode() <= 0o666
    True
    """
    return 0o666 & ~_umask()


def atomic_write(path: PathLike, content: Union[str, bytes]) -> None:
    """Replace ``path`` with ``content`` (text or bytes) so that readers see the old or the new file, never a mix.

    Example
    -------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> atomic_write(p, "{}")
    >>> p.read_text(), oct(p.stat().st_mode & 0o777) == oct(new_file_mode())
    ('{}', True)
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
            f.flush()
            os.fchmod(f.fileno(), new_file_mode())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # Make the rename itself durable (power loss right after os.replace).
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
