"""CPU cost (core-seconds per audio second) beside the RTF, and precision judged on CPU time under others' load.

Ground truths: a function that spins a known CPU time (a ``time.thread_time()`` busy loop) and then sleeps a known
wall time, measured for real; and hand-built records whose per-run figures are known.
"""
import time
from dataclasses import replace

from sbprof.analysis.intervals import RepeatPolicy
from sbprof.analysis.sweep import analyse
from sbprof.jobs.plan import next_run
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.report.sweep_markdown import render_markdown

ADAPTIVE = {"repeats": {"runs": "adaptive", "target": 0.05, "confidence": 0.95, "min_runs": 4, "max_runs": 8}}


def spin_then_sleep(spin_s, sleep_s):
    def fn():
        start = time.thread_time()
        while time.thread_time() - start < spin_s:
            pass
        time.sleep(sleep_s)
    return fn


def test_cpu_cost_is_the_spun_cpu_time_per_audio_second_while_rtf_counts_the_sleep():
    from sbprof.measuring.timing import measure  # torch: only here

    records = [replace(measure(spin_then_sleep(0.02, 0.03), warmup=1, repeats=5, audio_seconds=2.0, num_threads=1),
                       cell=Cell(model="m", device="cpu", threads=1, audio_s=2.0, batch_size=1, run=r))
               for r in range(3)]
    cell = analyse(Results("profile", rules={"measured": 5}, records=records)).models[0].settings[0].cells[(2.0, 1)]
    assert abs(cell.cpu_cost - 0.02 / 2.0) < 0.15 * 0.01  # core-seconds spun per audio second
    # The RTF counts the sleep too, and any wait for a core on this shared machine: bounded below only.
    assert cell.over_runs.interval.median >= 0.95 * (0.02 + 0.03) / 2.0
    assert cell.cpu_over_runs.interval.low <= cell.cpu_cost <= cell.cpu_over_runs.interval.high


def loaded_runs(load, wall=(0.10, 0.15, 0.11, 0.14), cpu=(0.100, 0.101, 0.099, 0.100)):
    """Four runs of one cell (1 s of audio): CPU time steady to +-1 %, wall time spread by the waiting."""
    return [Measurement(label="c", cell=Cell(model="m", device="cpu", threads=1, audio_s=1.0, batch_size=1, run=r),
                        wall_s=[w] * 3, cpu_s=[c] * 3, audio_seconds=1.0, settings=dict(ADAPTIVE),
                        extra={"others_cpu_s": load * 2.0, "window_s": 2.0})
            for r, (w, c) in enumerate(zip(wall, cpu))]


def test_under_load_precision_is_judged_on_cpu_time_and_the_report_says_so():
    summary = analyse(Results("profile", rules={"measured": 3}, records=loaded_runs(1.3)))
    setting = summary.models[0].settings[0]
    cell = setting.cells[(1.0, 1)]
    assert cell.judged_on_cpu and not cell.target_missed
    assert abs(cell.cpu_cost - 0.1) < 1e-3 and cell.over_runs.interval.median > 0.12
    text = render_markdown(summary)
    assert "Precision judged on CPU time for 1 cell: load 1.3 beside the run" in text
    assert "### CPU cost (core-seconds per audio second)" in text
    assert "0.100 core-seconds per audio second = 0.100 core-hours per hour of audio" in text


def test_without_load_precision_stays_on_wall_time():
    cell = analyse(Results("profile", rules={"measured": 3}, records=loaded_runs(0.1))).models[0].settings[0].cells[
        (1.0, 1)]
    assert not cell.judged_on_cpu and cell.target_missed  # +-20 % wall spread, no load to explain it


def test_cuda_cells_have_no_cpu_cost():
    records = [replace(m, cell=replace(m.cell, device="cuda:0")) for m in loaded_runs(1.3)]
    summary = analyse(Results("profile", rules={"measured": 3}, records=records))
    cell = summary.models[0].settings[0].cells[(1.0, 1)]
    assert cell.cpu_cost is None and not cell.judged_on_cpu
    assert "CPU cost" not in render_markdown(summary)


class View:
    def __init__(self, records):
        self.stored = {m.cell.key(): m for m in records}
        self.retry_failed = False

    def get(self, cell):
        return self.stored.get(cell.key())

    def records(self):
        return list(self.stored.values())

    def calibration(self):
        return []

    def retried(self, cell):
        return False


def test_adaptive_repeats_stop_on_cpu_time_only_when_the_load_explains_the_spread():
    policy = RepeatPolicy(target_rel=0.05, min_runs=4, max_runs=8)
    cell = Cell(model="m", device="cpu", threads=1, audio_s=1.0, batch_size=1, run=0)
    assert next_run(View(loaded_runs(1.3)), cell, policy) is None
    assert next_run(View(loaded_runs(0.1)), cell, policy).run == 4
    # Loaded, but the CPU time spreads as much as the wall time: nothing explains it, keep measuring.
    assert next_run(View(loaded_runs(1.3, cpu=(0.10, 0.15, 0.11, 0.14))), cell, policy).run == 4
