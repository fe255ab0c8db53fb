"""Is a GPU batch launch-bound or GPU-bound? Host and device busy time from one profiled call.

Process CPU time cannot answer it (the host spins inside
``cuda.synchronize``, so CPU time grows with GPU time), nor can a pair of
CUDA events (their span includes the device's idle gaps while it waits for
launches). One call profiled with CPU and CUDA activities can:

- **GPU busy**: the durations of the device's kernels, copies and memsets,
  each counted once;
- **host busy**: the call's wall time minus the time the host spent blocked
  in CUDA calls that wait for the device (``cuda*Synchronize``,
  ``cudaMemcpy*``), i.e. the time it spent launching and computing.

Near-equal wall, host busy and GPU busy << wall: launch-bound (the GPU
waits for the host). GPU busy close to wall: GPU-bound. The profiled call is
an extra call, never one of the timed batches; its host figure includes the
profiler's own cost (about a microsecond per operator).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sbprof.record.codec import Codec
from sbprof.measuring.events import SessionView, StepWindow, device_us, step_label, union_us

BLOCKING_CALLS = ("Synchronize", "cudaMemcpy")
"""Substrings of CUDA runtime/driver call names during which the host waits for the device."""


@dataclass(frozen=True)
class DeviceSplit(Codec):
    """Wall, host-busy and GPU-busy seconds of one profiled call."""

    wall_s: float
    host_busy_s: float
    gpu_busy_s: float


def _is_blocking(event: Any) -> bool:
    kind = getattr(event, "activity_type", None)
    runtime = kind in ("cuda_runtime", "cuda_driver") if kind is not None else event.name.startswith("cuda")
    return runtime and any(s in event.name for s in BLOCKING_CALLS)


def split_of(events: Sequence[Any], window_us: tuple) -> DeviceSplit:
    """The split of one call from its events and its window ``(start_us, end_us)``.

    Example
    -------
    >>> from torch.autograd import DeviceType
    >>> from torch.autograd.profiler_util import FunctionEvent
    >>> launch = FunctionEvent(1, "cudaLaunchKernel", 1, 0, 10, activity_type="cuda_runtime")
    >>> wait = FunctionEvent(2, "cudaStreamSynchronize", 1, 10, 90, activity_type="cuda_runtime")
    >>> kernel = FunctionEvent(3, "gemm", 7, 12, 82, device_type=DeviceType.CUDA, activity_type="kernel")
    >>> split_of([launch, wait, kernel], (0, 100))
    DeviceSplit(wall_s=0.0001, host_busy_s=2e-05, gpu_busy_s=7e-05)
    """
    start, end = window_us
    blocked = union_us((max(e.time_range.start, start), min(e.time_range.end, end))
                       for e in events if _is_blocking(e) and e.time_range.end > start and e.time_range.start < end)
    wall = end - start
    return DeviceSplit(wall_s=wall / 1e6, host_busy_s=(wall - blocked) / 1e6, gpu_busy_s=device_us(events) / 1e6)


def measure_device_split(fn: Callable[[], Any]) -> DeviceSplit:
    """Profile one call of ``fn`` (work on a CUDA device) and split its time.

    Example
    -------
    >>> import torch
    >>> if torch.cuda.is_available():
    ...     x = torch.randn(512, 512, device="cuda")
    ...     s = measure_device_split(lambda: x @ x)
    ...     assert 0 < s.gpu_busy_s <= s.wall_s
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function(step_label("batch")):
            fn()
            torch.cuda.synchronize()
    view = SessionView(prof.profiler)
    window: StepWindow = view.windows[0]
    events = view.events_in([window])
    return split_of(events, (view.to_us(window.start_ns), view.to_us(window.end_ns)))
