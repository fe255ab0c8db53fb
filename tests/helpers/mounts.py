"""Real small and read-only file systems for the tests of full disks and read-only folders.

A test gets a real tmpfs of a few MiB (``size=12m``: writes past it fail with ENOSPC, as on a full disk) or a
real read-only mount of a folder (writes fail with EROFS), made with ``mount`` and undone after the test. Only
root can mount: elsewhere the test is skipped, saying why.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


def _mount(args: list) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("making a real small or read-only file system needs root and mount(8)")
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount refused here: {done.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextmanager
def small_disk(path: Path, size: str = "12m") -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``path`` (made), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    _mount(["-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)])
    try:
        yield path
    finally:
        _umount(path)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a folder) bound read-only onto itself, as a read-only checkout is; undone afterwards."""
    _mount(["--bind", str(path), str(path)])
    try:
        done = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"a read-only remount was refused here: {done.stderr.strip()}")
        yield path
    finally:
        _umount(path)


def fill(folder: Path) -> None:
    """Fill the disk of ``folder`` to its last byte (unbuffered writes, so nothing fails later on close)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
