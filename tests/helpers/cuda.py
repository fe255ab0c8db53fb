"""Outside clocks and known GPU work for the CUDA ground-truth tests.

- :func:`event_seconds`: a call timed by CUDA events the test records itself
  (on the current stream, the device synchronised at the end);
- :func:`gpu_busy_for`: the GPU kept busy until a wall-clock deadline, with
  short kernels (``torch.cuda._sleep`` spins GPU clock cycles) launched and
  awaited one after the other: a known time, whatever the GPU's clock (an H200
  here idled at 345 MHz and ran at 1980 MHz, so a number of cycles is no
  known time). Every test still compares with its own events, never with the
  nominal time;
- :func:`warm_cuda`: the CUDA context, cuBLAS's handle (its first product
  creates it on the host, tens of milliseconds, seen on an H200) and the
  GPU's clock brought up by a moment of products, before anything is timed.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Tuple

import torch

SPIN_CYCLES = 200_000
"""Cycles of one short kernel of :func:`gpu_busy_for`: 0.1 ms at 2 GHz, 0.6 ms at 345 MHz (its overshoot)."""


def event_seconds(fn: Callable[[], Any]) -> Tuple[Any, float]:
    """``fn()``'s result and the seconds between two CUDA events recorded around it."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return out, start.elapsed_time(end) / 1e3


def gpu_busy_for(seconds: float) -> None:
    """Keep the current GPU busy until ``seconds`` of wall clock have passed (returns when its work is done)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        torch.cuda._sleep(SPIN_CYCLES)
        torch.cuda.synchronize()


def warm_cuda(device: str = "cuda", seconds: float = 0.3) -> None:
    """Create the CUDA context and cuBLAS's handle, then run products for ``seconds`` (the clock comes up)."""
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        (a @ a).sum().item()
    torch.cuda._sleep(1000)  # the sleep kernel's first launch loads it
    torch.cuda.synchronize()


class GpuBusy(torch.nn.Module):
    """Returns its input after keeping the GPU busy ``seconds`` (a module a model can hold: known GPU work)."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gpu_busy_for(self.seconds)
        return x
