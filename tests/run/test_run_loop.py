"""sbprof run on a plain PyTorch loop (tests/run/recipes/loop/train.py), against the script's own clocks."""
from __future__ import annotations

import statistics

import pytest

from run_helpers import LOOP, measured, records, sbprof_run

pytestmark = pytest.mark.slow


def test_a_sleeping_dataset_reads_as_data_wait(tmp_path):
    log = tmp_path / "getitem_s.txt"
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "20", "--sleep_ms", "20",
                       "--getitem_log", str(log)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    train = records(tmp_path / "out")["train"]
    assert train["extra"]["kind"] == "loop" and len(train["wall_s"]) == 5
    # One item per batch, fetched in this process (no workers): each measured step waited for its item's
    # __getitem__ (the dataset's own perf_counter), plus DataLoader bookkeeping.
    # A sleep cannot end early: tight from below; from above the median within 10 % (a step preempted by other work
    # on the machine between the item and the batch may wait longer once).
    getitem = [float(v) for v in log.read_text().split()][2:7]
    waits = measured(train, "data_wait_s")
    assert all(own <= wait for wait, own in zip(waits, getitem))
    assert statistics.median(w / own for w, own in zip(waits, getitem)) <= 1.10
    # Stopped after the stage's 12 planned steps (2 warm-up, 5 measured, a memory, 2 per-module and 2 traced
    # steps): the 13th item was fetched, then its step stopped the script.
    assert "trained" not in done.stdout and len(train["extra"]["roles"]) == 12
    assert len(log.read_text().split()) == 13


def test_a_spinning_module_leads_the_module_table(tmp_path):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "12", "--spin_ms", "15",
                       "--workers", "2"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    train = records(tmp_path / "out")["train"]
    rows = [r for r in train["extra"]["modules"]["rows"] if r["label"] != "(other)"]
    top = max(rows, key=lambda r: r["total_ms"])
    # The spin burns 15 ms of process CPU time: its wall time cannot be shorter, and it fits in the step (rows are
    # means over the measured steps, like the step time they are shares of).
    assert top["label"] == "2" and top["type"] == "Spin"
    # The per-module steps are the stage's own (after the measured ones): the spin fits in each of them.
    module_steps = [w for w, r in zip(train["extra"]["all_wall_s"], train["extra"]["roles"]) if r == "modules"]
    assert len(module_steps) == train["extra"]["modules"]["steps"] == 2
    assert 15.0 <= top["forward_ms"] <= statistics.mean(train["extra"]["modules"]["step_ms_samples"])
    assert top["forward_ms"] <= 1e3 * statistics.mean(module_steps)
    assert all(f >= 0.015 for f in measured(train, "forward_s"))
    # FLOPs of the last warm-up step, by hand: Linear(16, 32) on one row (16 x 32 MACs, 32 bias adds), ReLU (32),
    # Linear(32, 1) (32 MACs, 1 bias add), mse_loss on one element (subtract, square, add, the mean's divide), then
    # SGD's update, a multiply and an add per parameter (577); backward holds mse_loss's 3 FLOPs.
    flops = train["extra"]["flops"]
    assert flops["forward"] == (2 * 16 * 32 + 32) + 32 + (2 * 32 + 1) + 4 + 2 * 577
    assert flops["untracked"] == {}
    assert train["extra"]["peak_flops"]["flops_per_s"] > 0
    report = (tmp_path / "out" / "report.md").read_text()
    table = report.split("### Per-module time (top first)")[1]
    assert table.split("\n")[4].startswith("| 2 ")  # first row under the header


def test_the_scripts_own_flags_go_to_it_untouched(tmp_path):
    done = sbprof_run(["--warmup", "1", "--measured", "2", "--output_folder", str(tmp_path / "out"), str(LOOP),
                       "--steps", "4", "--warmup", "7"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "('warmup', 7)" in done.stdout and "('steps', 4)" in done.stdout
    assert records(tmp_path / "out")["train"]["warmup"] == 1


def test_a_module_runs_with_dash_m(tmp_path):
    done = sbprof_run(["--warmup", "1", "--measured", "2", "--output_folder", str(tmp_path / "out"), "-m", "train",
                       "--steps", "3"], cwd=LOOP.parent)
    assert done.returncode == 0, done.stderr
    assert "trained 3 steps" in done.stdout  # three steps is exactly warm-up + measured: nothing to stop
    # sbprof run never imports SpeechBrain (seconds, and its quirks) into a script that does not use it.
    assert "speechbrain imported: False" in done.stdout
    assert len(records(tmp_path / "out")["train"]["wall_s"]) == 2


def test_a_script_raising_in_step_3_keeps_its_traceback_and_a_report(tmp_path):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "8", "--raise_at", "3"],
                      cwd=tmp_path)
    assert done.returncode == 1
    trace = done.stderr[done.stderr.index("Traceback (most recent call last):"):]
    assert trace.rstrip().endswith("RuntimeError: the recipe's own error at step 3")
    assert str(LOOP) in trace and "sbprof" not in trace and "runpy" not in trace
    train = records(tmp_path / "out")["train"]
    assert train["warmup"] == 2 and len(train["wall_s"]) == 1  # steps 0 and 1 warm-up, step 2 measured
    assert "the script raised RuntimeError" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("flag, code, words", [("--exit_at", 3, "exited with status 3"),
                                               ("--interrupt_at", 130, "was interrupted")])
def test_a_script_that_exits_or_is_interrupted_leaves_a_report_and_its_status(tmp_path, flag, code, words):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "8", flag, "4"],
                      cwd=tmp_path)
    assert done.returncode == code, done.stderr
    train = records(tmp_path / "out")["train"]
    assert len(train["wall_s"]) == 2  # steps 2 and 3 measured, then the script ended in step 4
    assert words in (tmp_path / "out" / "report.md").read_text()


def test_a_run_in_which_no_step_could_be_measured_fails_with_one_line(tmp_path):
    # One step, and --warmup 1: it is the warm-up step that counts FLOPs, never measured.
    done = sbprof_run(["--warmup", "1", "--output_folder", str(tmp_path / "out"), str(LOOP), "--steps", "1"],
                      cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sbprof: error: no step could be measured: stage train ran 1 step (flops)")
    assert "--warmup 0" in last
    # What was recorded is kept, and the report says the stage had nothing measured.
    assert "No step could be measured" in (tmp_path / "out" / "report.md").read_text()
