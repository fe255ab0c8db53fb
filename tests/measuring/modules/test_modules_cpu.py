"""Per-module CPU time against ground truth: a known CPU spin, and a sleep that burns none.

The spin is held against the thread's own CPU clock (``time.thread_time``), so
it is a known amount of CPU work whatever the load: other processes on the
machine stretch its wall time, not its CPU time. The process clock the rows read
counts every thread, so a row may hold a little more than the spin (the
interpreter, the hooks), never less: the lower bound is firm, the upper loose.
No assertion here reads the wall clock against a bound that load could break,
except "a sleep lasts at least its length".
"""
import time

import torch

from sbprof.analysis.breakdown import ModuleBreakdown, breakdown_steps
from sbprof.measuring.modules import ModuleAttribution
from sbprof.report.modules_markdown import render_breakdown

SPIN_S = 0.02
SLEEP_S = 0.02
STEPS = 3


def spin(seconds):
    """Burn ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class SpinBackward(torch.autograd.Function):
    """Identity whose backward burns a known CPU time."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        spin(SPIN_S)
        return grad


class Spinner(torch.nn.Module):
    def forward(self, x):
        spin(SPIN_S)
        return x * 2


class Sleeper(torch.nn.Module):
    def forward(self, x):
        time.sleep(SLEEP_S)
        return x + 1


class BackwardSpinner(torch.nn.Module):
    def forward(self, x):
        return SpinBackward.apply(x)


class Parent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.spinner, self.sleeper, self.back = Spinner(), Sleeper(), BackwardSpinner()

    def forward(self, x):
        return self.back(self.sleeper(self.spinner(x)))


def measured(backward):
    torch.set_num_threads(1)
    model = torch.nn.Sequential(Parent())  # the root itself gets no row: the parent is its child "0"
    attribution = ModuleAttribution(model, modules=["0", "0.spinner", "0.sleeper", "0.back"])
    x = torch.ones(4, requires_grad=True)
    with attribution:
        for _ in range(STEPS):
            with attribution.step("s"):
                out = model(x)
                if backward:
                    out.sum().backward()
    return attribution.breakdown("s")


def test_a_known_cpu_spin_reads_its_cpu_time_and_a_sleep_reads_none():
    b = measured(backward=False)
    spinner, sleeper, parent = b.row("0.spinner"), b.row("0.sleeper"), b.row("0")
    ms = 1e3 * SPIN_S
    assert ms <= spinner.cpu_total_ms <= 1.3 * ms  # process CPU >= the spinning thread's own
    assert spinner.cpu_self_ms == spinner.cpu_total_ms  # nothing nested under it
    assert sleeper.total_ms >= 1e3 * SLEEP_S and sleeper.cpu_total_ms < 0.1 * ms  # waited, burnt (almost) nothing
    # The parent holds both: its CPU total is the spin plus little; its self time is its own code only.
    assert spinner.cpu_total_ms + sleeper.cpu_total_ms <= parent.cpu_total_ms <= 1.3 * ms
    assert 0 <= parent.cpu_self_ms < 0.1 * ms
    assert len(b.cpu_step_ms_samples) == STEPS and min(b.cpu_step_ms_samples) >= ms
    assert 0 <= b.row("(other)").cpu_total_ms <= b.row("(other)").total_ms + 1  # CPU <= wall, one thread


def test_backward_cpu_goes_to_the_module_that_made_the_nodes():
    b = measured(backward=True)
    ms = 1e3 * SPIN_S
    back, parent = b.row("0.back"), b.row("0")
    assert back.backward_ms is not None and ms <= back.cpu_total_ms <= 1.3 * ms  # spun in backward only
    assert ms <= b.row("0.spinner").cpu_total_ms <= 1.3 * ms  # its backward (x * 2) costs ~nothing
    assert 2 * ms <= parent.cpu_total_ms <= 2.6 * ms  # both spins, forward and backward


def test_the_table_shows_cpu_ms_and_the_cost_per_audio_second():
    b = ModuleBreakdown.from_dict(measured(backward=False).to_dict())  # as a results file reads it back
    no_audio = render_breakdown(b, breakdown_steps(b))
    assert "CPU ms" in no_audio and "n/a (no audio)" in no_audio
    steps = breakdown_steps(b, audio_s_per_step=0.5)
    assert steps.cpu_cost["0.spinner"] == b.row("0.spinner").cpu_total_ms / 1e3 / 0.5  # core-seconds per audio second
    text = render_breakdown(b, steps)
    assert "core-seconds per second of audio" in text and "n/a (no audio)" not in text
