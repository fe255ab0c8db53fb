"""Run a callable with warm-up and repetitions and return one :class:`Measurement`.

Every measured call is bracketed the same way: on CUDA the device is
synchronised before the clock starts and before it stops (kernels are
asynchronous, so a host clock alone would time only the launches), and a pair
of CUDA events gives the GPU-side time of the same call.

Measurements run one at a time in a process: each changes process-wide state
(torch's thread count, the resettable memory high-water mark) and would time
the others' work, so concurrent calls from several threads wait for each other.
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from sbprof.base.checks import check_int, check_threads_count, parse_device
from sbprof.measuring.env import collect_env
from sbprof.base.errors import BackendUnavailable, ConfigError
from sbprof.measuring.memory import CpuPeak, CudaPeak
from sbprof.record import Cell, Measurement, MemoryPeak

DeviceLike = Union[str, torch.device]

PROCESS_WARMUP_S = 0.5
PROCESS_WARMUP_CALLS = 3
"""The process-level warm-up (:func:`warm_up_process`): at least this long and this many calls."""

# One measurement at a time per process (see the module docstring); the owner's
# thread id lets a nested call fail clearly instead of waiting for itself.
_MEASURING = threading.Lock()
_measuring_thread: Optional[int] = None


def resolve_device(device: DeviceLike) -> torch.device:
    """Turn ``"cpu"``/``"cuda"``/``"cuda:1"`` into a device, refusing unavailable ones.

    Example
    -------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    kind, index = parse_device(str(device))
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise BackendUnavailable(f"device {str(device)!r} asked for, but CUDA is not available on this machine")
    return torch.device("cuda", torch.cuda.current_device() if index is None else index)


def warm_up_process(fn: Callable[[], Any]) -> int:
    """Call ``fn`` until :data:`PROCESS_WARMUP_S` have passed and :data:`PROCESS_WARMUP_CALLS` were made;
    returns the number of calls.

    A fresh worker process runs it once, before its first measured cell:
    thread pools start, the allocator and the model's caches fill, and the
    first cell timed no longer pays for them (the first cell of a process
    read up to 1.4x its median in the runs behind issue 21). A call that
    raises propagates: the cell it belongs to fails as its own measurement
    would.

    Example
    -------
    >>> warm_up_process(lambda: None) >= PROCESS_WARMUP_CALLS
    True
    """
    calls, start = 0, time.perf_counter()
    while calls < PROCESS_WARMUP_CALLS or time.perf_counter() - start < PROCESS_WARMUP_S:
        fn()
        calls += 1
    return calls


def _memory_pass(fn: Callable[[], Any], dev: torch.device) -> MemoryPeak:
    """One more call, alone, with the heap trimmed and the peaks reset first: what one call needs."""
    on_cuda = dev.type == "cuda"
    cuda_peak = CudaPeak(dev) if on_cuda else None
    if cuda_peak:
        torch.cuda.empty_cache()
        cuda_peak.start()
    cpu_peak = CpuPeak()
    cpu_peak.start()  # trims the heap, then resets the high-water mark
    memory = MemoryPeak(heap_trim=cpu_peak.heap_trim)
    fn()
    if on_cuda:
        torch.cuda.synchronize(dev)
    memory.peak_rss_bytes, memory.peak_rss_delta_bytes = cpu_peak.stop()
    memory.rss_method = cpu_peak.method
    if cuda_peak:
        memory.peak_cuda_bytes, memory.peak_cuda_delta_bytes, memory.peak_cuda_reserved_bytes = cuda_peak.stop()
    return memory


def _run(fn: Callable[[], Any], dev: torch.device, warmup: int, repeats: int, min_time_s: float,
         max_repeats: int, num_threads: Optional[int], track_memory: bool
         ) -> Tuple[List[float], List[float], List[float], Optional[MemoryPeak], int]:
    """The warm-up, timed and memory calls of one measurement: (wall, cpu, gpu, memory, threads)."""
    on_cuda = dev.type == "cuda"
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        for _ in range(warmup):
            fn()
        wall: List[float] = []
        cpu: List[float] = []
        gpu: List[float] = []
        stream = torch.cuda.current_stream(dev) if on_cuda else None
        while len(wall) < repeats or (sum(wall) < min_time_s and len(wall) < max_repeats):
            if on_cuda:
                start_ev = torch.cuda.Event(enable_timing=True)
                end_ev = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize(dev)
                start_ev.record(stream)
            c0 = time.process_time()
            t0 = time.perf_counter()
            fn()
            if on_cuda:
                end_ev.record(stream)
                torch.cuda.synchronize(dev)
            t1 = time.perf_counter()
            c1 = time.process_time()
            wall.append(t1 - t0)
            cpu.append(c1 - c0)
            if on_cuda:
                gpu.append(start_ev.elapsed_time(end_ev) / 1000.0)
        memory = _memory_pass(fn, dev) if track_memory else None
        return wall, cpu, gpu, memory, torch.get_num_threads()
    finally:
        torch.set_num_threads(previous_threads)


def measure(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    repeats: int = 10,
    min_time_s: float = 0.0,
    max_repeats: int = 1000,
    device: DeviceLike = "cpu",
    num_threads: Optional[int] = None,
    label: Optional[str] = None,
    cell: Optional[Cell] = None,
    settings: Optional[Dict[str, Any]] = None,
    audio_seconds: Optional[float] = None,
    track_memory: bool = True,
) -> Measurement:
    """Time ``fn()``, then measure the memory one call needs.

    ``fn`` is called ``warmup`` times unmeasured, then at least ``repeats``
    times timed, and more (up to ``max_repeats``) until the timed calls add
    up to ``min_time_s``. With ``track_memory``, one more call follows alone:
    garbage collected and heap trimmed first (so memory kept by the allocator
    from earlier calls cannot hide what this one allocates), CPU high-water
    mark and CUDA allocator peak reset, then read. Timed calls are never
    disturbed by memory tracking.

    Calls from several threads run one after the other (a lock), so each
    measurement runs alone among ``measure`` calls; work that other threads
    do outside ``measure`` still shares the machine. Calling ``measure`` from
    inside a measured ``fn`` is refused.

    Arguments
    ---------
    fn : callable
        Zero-argument callable; its result is discarded.
    warmup, repeats, min_time_s, max_repeats
        Repetition control (see above).
    device : str or torch.device
        Where ``fn`` runs its work: decides synchronisation, CUDA events (on
        that device's current stream) and which allocator peak is read.
    num_threads : int, optional
        ``torch.set_num_threads`` for the measurement (restored afterwards).
    label, cell, settings, audio_seconds
        Stored in the record (the cell's device and threads are set to what
        was measured); ``audio_seconds`` per call makes RTF figures possible.
    track_memory : bool
        Add the memory call (see above).

    Returns
    -------
    Measurement

    Example
    -------
    >>> import time
    >>> m = measure(lambda: time.sleep(0.01), warmup=0, repeats=3)
    >>> len(m.wall_s), m.summary("wall_s").median >= 0.01
    (3, True)
    """
    if not callable(fn):
        raise ConfigError(f"measure() needs a callable, got {type(fn).__name__}")
    check_int(warmup, "warmup", 0)
    check_int(repeats, "repeats", 1)
    check_int(max_repeats, "max_repeats", repeats)
    if min_time_s < 0:
        raise ConfigError(f"min_time_s must be >= 0, got {min_time_s!r}")
    if num_threads is not None:
        check_threads_count(num_threads, "num_threads")
    dev = resolve_device(device)
    global _measuring_thread
    if _measuring_thread == threading.get_ident():
        raise ConfigError("measure() called from inside a measured function: measurements cannot nest")
    with _MEASURING:
        _measuring_thread = threading.get_ident()
        try:
            wall, cpu, gpu, memory, measured_threads = _run(fn, dev, warmup, repeats, min_time_s, max_repeats,
                                                            num_threads, track_memory)
        finally:
            _measuring_thread = None
    return Measurement(
        label=label or getattr(fn, "__qualname__", repr(fn)),
        cell=replace(cell or Cell(), device=str(dev), threads=measured_threads),
        warmup=warmup,
        wall_s=wall,
        cpu_s=cpu,
        cuda_s=gpu if dev.type == "cuda" else None,
        audio_seconds=audio_seconds,
        memory=memory,
        settings=dict(settings or {}),
        env=collect_env(),
    )
