"""Outside clocks and known GPU work for the CUDA ground-truth tests.

- :func:`event_seconds`: a call timed by CUDA events the test records itself
  (on the current stream, the device synchronised at the end);
- :func:`gpu_sleep`: one kernel that keeps the GPU busy for about a given time
  (``torch.cuda._sleep`` spins a number of GPU clock cycles; the cycles per
  second are calibrated once per process against CUDA events, so the time is
  approximate, and every test compares with its own events, never with the
  nominal time);
- :func:`warm_cuda`: cuBLAS's first product creates its handle on the host
  (tens of milliseconds, seen on an H200): done before anything is timed.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Tuple

import torch


def event_seconds(fn: Callable[[], Any]) -> Tuple[Any, float]:
    """``fn()``'s result and the seconds between two CUDA events recorded around it."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return out, start.elapsed_time(end) / 1e3


@functools.lru_cache(maxsize=None)
def _cycles_per_second() -> float:
    torch.cuda._sleep(1000)  # the kernel's first launch loads it: not timed
    torch.cuda.synchronize()
    cycles = 20_000_000
    rates = [cycles / event_seconds(lambda: torch.cuda._sleep(cycles))[1] for _ in range(3)]
    return sorted(rates)[1]


def gpu_sleep(seconds: float) -> None:
    """Enqueue one kernel that spins about ``seconds`` on the current device (asynchronous, like any kernel)."""
    torch.cuda._sleep(max(1, int(seconds * _cycles_per_second())))


def warm_cuda(device: str = "cuda") -> None:
    """Create the CUDA context, cuBLAS's handle and the sleep kernel's calibration before anything is timed."""
    a = torch.randn(256, 256, device=device)
    (a @ a).sum().item()
    _cycles_per_second()


class GpuBusy(torch.nn.Module):
    """Returns its input after keeping the GPU busy ``seconds`` (a module a model can hold: known GPU work)."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gpu_sleep(self.seconds)
        return x
