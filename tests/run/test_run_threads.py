"""sbprof run never raises its internal stop in a thread of the user's: a loop that trains in a worker thread runs
to its end (issue 39: the stop exception killed the thread, and its training with it)."""
from __future__ import annotations

import pytest

from run_helpers import LOOP, records, sbprof_run

pytestmark = pytest.mark.slow


def test_a_loop_in_a_worker_thread_is_measured_and_never_stopped_there(tmp_path):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "16", "--thread"],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    # The thread trained every step (sbprof could not stop it between steps without killing it) and ended.
    assert "trained 16 steps" in done.stdout and "the trainer thread ended" in done.stdout
    assert "Exception in thread" not in done.stderr and "StopRun" not in done.stderr
    train = records(tmp_path / "out")["train"]
    assert len(train["wall_s"]) == 5 and train["extra"]["roles"][:7] == ["warmup", "flops"] + ["measured"] * 5
    assert "the script ran to its end" in (tmp_path / "out" / "report.md").read_text()
