"""The CPU-per-step column against a known CPU spin: a backend whose step spins 20 ms of this thread's CPU time
(``time.thread_time``) reads 20 ms of CPU per step within 5 %, measured by the real stepper, analysed and printed.
A CPU-time spin is the same CPU time however long it waits for a core, so load cannot fail this."""
from __future__ import annotations

import time

import pytest

from sbprof.analysis.transducer import analyse
from sbprof.record import Cell, Measurement
from sbprof.report.transducer import render_csv, render_markdown
from sbprof.results.store import Results
from sbprof.transducer.backends.base import Backend
from sbprof.transducer.worker import Stepper

SPIN_S = 0.020


class _Spinner(Backend):
    name = "spinner"
    module = "time"

    def train_loss(self, batch):
        deadline = time.thread_time() + SPIN_S
        while time.thread_time() < deadline:
            pass
        return batch.encoder_out.sum().reshape(1)


def test_cpu_per_step_reads_a_known_cpu_spin_within_5_percent():
    stepper = Stepper(_Spinner(), "cpu", vocab_size=10, joiner_dim=4, blank=0, seed=0)
    found = stepper.measure([[(5, 2)]] * 8, unmeasured=2, trace_path=None)
    m = Measurement("spinner", cell=Cell(model="spinner", batch_size=1, params={"mode": "fixed"}),
                    wall_s=found["wall_s"], cpu_s=found["cpu_s"],
                    extra={"agreement": {"ok": True, "max_loss_rel_diff": 0.0, "max_grad_abs_diff": 0.0}})
    summary = analyse(Results("transducer", records=[m]))
    (row,) = summary.rows
    mean, low, high = row.cpu_step_s
    assert mean == pytest.approx(SPIN_S, rel=0.05) and mean >= SPIN_S * 0.999 and low <= mean <= high
    text = render_markdown(summary)
    assert "CPU per step [interval] (core-µs)" in text and f"{mean * 1e6:,.0f} [" in text
    assert "spin while waiting (OpenMP)" in text and "not per second of audio" in text
    assert f"{mean * 1e6}" in render_csv(summary).splitlines()[1]


def test_no_cpu_figure_where_the_step_ran_on_a_gpu():
    m = Measurement("g", cell=Cell(model="g", device="cuda:0", batch_size=1, params={"mode": "fixed"}),
                    wall_s=[0.001, 0.002], cpu_s=[0.001, 0.002],
                    extra={"agreement": {"ok": True, "max_loss_rel_diff": 0.0, "max_grad_abs_diff": 0.0}})
    summary = analyse(Results("transducer", records=[m]))
    assert summary.rows[0].cpu_step_s is None and "n/a (GPU)" in render_markdown(summary)
