"""A disk that fills: every message names the path and says what to do; a run that saved nothing leaves nothing.

The full disk is injected (ENOSPC from the one write that fails on a real full disk), so the tests run anywhere.
"""
from __future__ import annotations

import errno
import json
import os

import pytest

from helpers.fake_interfaces import use_test_environment
from helpers.job_configs import argv_of
from sbprof.cli import main
from sbprof.results import RESULTS_FILE
from sbprof.results.lock import LOCK_FILE


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def test_a_count_on_a_full_disk_names_the_folder_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """On a full disk (a real one here read "[Errno 28] No space left on device" and left a folder holding only
    its lock file), the first write is the lock's process id."""
    real_write = os.write

    def full_for_the_lock(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(LOCK_FILE):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    out = tmp_path / "counts"
    argv = argv_of("flops", tmp_path, out)
    monkeypatch.setattr(os, "write", full_for_the_lock)
    code = main(["flops", *argv])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 1 and err == (f"sbprof: error: cannot write in {out}: No space left on device; nothing was "
                                 "measured, and the folder this run made is removed\n"), err
    assert not out.exists()


@pytest.mark.slow
def test_train_stopped_by_a_full_disk_after_its_first_variant_says_to_run_it_again(tmp_path, capsys, monkeypatch):
    """The reports written after the first of two variants find the disk full: the message says to run the same
    command again, and doing so measures the second variant only and writes the reports."""
    from sbprof.results import files

    out = tmp_path / "out"
    real = files.os.replace

    def full_for_reports(src, dst):
        if not str(dst).endswith(RESULTS_FILE):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)

    argv = argv_of("train", tmp_path, out)
    monkeypatch.setattr(files.os, "replace", full_for_reports)
    code = main(["train", *argv])
    monkeypatch.setattr(files.os, "replace", real)
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert f"cannot write the reports in {out}: No space left on device" in err
    assert "free some space and run the same command again (a run goes on where it stopped" in err
    assert len(json.loads((out / RESULTS_FILE).read_text())["records"]) == 1  # the first variant, kept
    assert main(["train", *argv]) == 0
    assert "measured 1 cell(s) (0 failed), 1 already done" in capsys.readouterr().out
    assert len(json.loads((out / RESULTS_FILE).read_text())["records"]) == 2 and (out / "report.md").exists()


def test_render_only_on_a_read_only_folder_says_so_not_to_free_space(tmp_path, capsys):
    """A real read-only mount (a results folder on a read-only share): before, the message advised freeing disk
    space and running the same command again."""
    from helpers.mounts import read_only

    out = tmp_path / "out"
    assert main(["flops", *argv_of("flops", tmp_path, out)]) == 0
    (out / "report.md").unlink()
    capsys.readouterr()
    with read_only(out):
        code = main(["flops", "--render-only", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert f"cannot write the reports in {out}: Read-only file system" in err
    assert "the folder cannot be written (read-only or not yours): copy it somewhere writable" in err
    assert "space" not in err and "run the same command again" not in err
