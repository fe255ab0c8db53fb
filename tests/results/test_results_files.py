"""Output folders that cannot hold results are refused before anything is measured; one run per folder."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from sbprof.base.errors import ConfigError
from sbprof.results import files as files_module
from sbprof.results.files import SpaceReserve, prepare_output_folder
from sbprof.results.lock import FolderInUse, FolderLock


def test_usable_folders_are_made(tmp_path):
    assert prepare_output_folder(tmp_path / "a" / "b") == (tmp_path / "a" / "b").resolve()
    assert os.listdir(tmp_path / "a" / "b") == []  # the write probe leaves nothing


@pytest.mark.parametrize("case, expected", [
    ("file", "exists and is a regular file, not a folder"),
    ("under_file", "a part of its path is a file"),
    ("dev_null", "exists and is a character device, not a folder"),
    ("empty", "is empty"),
    ("read_only", "is not writable"),
])
def test_unusable_folders_are_one_line(tmp_path, case, expected):
    (tmp_path / "f").write_text("x")
    folder = {"file": tmp_path / "f", "under_file": tmp_path / "f" / "sub", "dev_null": "/dev/null", "empty": ""}.get(case)
    if case == "read_only":
        if os.geteuid() == 0:  # root writes through permission bits: use a folder the kernel refuses
            folder = "/sys/kernel"
            if not os.path.isdir(folder):
                pytest.skip("no /sys/kernel here")
        else:
            folder = tmp_path / "ro"
            folder.mkdir()
            folder.chmod(0o555)
    with pytest.raises(ConfigError) as info:
        prepare_output_folder(folder)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_second_run_is_refused_naming_the_first(tmp_path):
    with FolderLock(tmp_path):
        with pytest.raises(FolderInUse, match=rf"in use by another sbprof run \(process {os.getpid()}\)"):
            FolderLock(tmp_path).acquire()
    with FolderLock(tmp_path):  # released on exit: free again
        pass


def test_lock_of_a_killed_run_is_taken_over(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from sbprof.results.lock import FolderLock; "
        f"FolderLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderInUse, match=f"process {holder.pid}"):
            FolderLock(tmp_path).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        deadline = time.monotonic() + 10
        while True:  # the kernel drops the lock with the process
            try:
                with FolderLock(tmp_path) as lock:
                    assert lock.holder() == os.getpid()
                break
            except FolderInUse:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_the_reserve_is_taken_before_a_run(tmp_path):
    reserve = SpaceReserve(tmp_path)
    reserve.require()
    assert reserve.held and reserve.path.stat().st_size == 8 * 2**20
    assert reserve.release() and not reserve.path.exists()


@pytest.mark.parametrize("failure, expected", [
    (errno.ENOSPC, "its disk has less than 8 MiB free; free some space first"),
    (None, "cannot hold results: No such file or directory"),  # the folder was never made
])
def test_a_run_that_cannot_take_its_reserve_is_refused_with_the_real_cause(tmp_path, monkeypatch, failure, expected):
    folder = tmp_path
    if failure is None:
        folder = tmp_path / "missing"
    else:
        def full(fd, offset, length):
            raise OSError(failure, os.strerror(failure))
        monkeypatch.setattr(files_module.os, "posix_fallocate", full)
    reserve = SpaceReserve(folder)
    with pytest.raises(ConfigError, match=expected):
        reserve.require()
    assert not reserve.held and not reserve.path.exists()


def test_a_file_system_without_fallocate_runs_without_a_reserve(tmp_path, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(files_module.os, "posix_fallocate", unsupported)
    reserve = SpaceReserve(tmp_path)
    reserve.require()
    assert not reserve.held and not reserve.path.exists()
