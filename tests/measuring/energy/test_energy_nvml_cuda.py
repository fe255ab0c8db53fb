"""CUDA ground truth of GPU energy: sbprof's EnergyMeter (NVML's cumulative energy counter) over a window holding one
known busy second (bf16 products back to back) between idle margins, against NVML's own power readings sampled every
10 ms by the test over the same window and integrated (trapezoids). The idle margins hold what the power reading's
own averaging smears past the busy second, so the two integrals cover the same energy; 15 % allows for the counter's
update period and the readings' averaging."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from benchmarks.gpu_truths import check, relative, trapezoid_joules
from helpers.cuda import warm_cuda
from sbprof.measuring.energy.meter import EnergyMeter

pytestmark = pytest.mark.cuda


class PowerSampler(threading.Thread):
    """NVML power readings (W) with their perf_counter times, every ``period_s`` until stopped."""

    def __init__(self, nvml, handle, period_s: float = 0.01):
        super().__init__(daemon=True)
        self.nvml, self.handle, self.period_s = nvml, handle, period_s
        self.times, self.watts = [], []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            watts = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3
            self.times.append(time.perf_counter())
            self.watts.append(watts)
            time.sleep(self.period_s)


def busy_second() -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    deadline = time.perf_counter() + 1.0
    while time.perf_counter() < deadline:
        for _ in range(4):
            torch.mm(a, a)
        torch.cuda.synchronize()


def test_nvml_energy_of_a_busy_second_against_integrated_power_readings():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    pynvml.nvmlInit()
    try:
        if pynvml.nvmlDeviceGetCount() != 1:
            pytest.skip("several GPUs: NVML's index of cuda:0 is not matched here (one-GPU machines only)")
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        warm_cuda()
        time.sleep(1.0)  # back to idle after warming up
        sampler = PowerSampler(pynvml, handle)
        with EnergyMeter(cpu=False, gpu_indices=[0]) as meter:
            sampler.start()
            time.sleep(0.5)
            busy_second()
            time.sleep(1.5)
            sampler.done.set()
            sampler.join()
    finally:
        pynvml.nvmlShutdown()
    result = meter.result
    assert result.measurable, result.describe()
    (joules,) = result.joules.values()
    outside = trapezoid_joules(sampler.times, sampler.watts)
    # the meter's window is a few milliseconds wider than the sampler's: add those at the first reading's power
    outside += max(0.0, result.duration_s - (sampler.times[-1] - sampler.times[0])) * sampler.watts[0]
    check(relative(f"NVML energy of a window with one busy second ({result.duration_s:.2f} s)", joules, outside, 0.15,
                   "J"))
    assert max(sampler.watts) > 1.5 * min(sampler.watts)  # the busy second showed in the readings: not all idle
