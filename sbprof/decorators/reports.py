"""``report_time``, ``report_memory`` and ``events_diff``: figures read from a finished profile.

Each figure says which events it sums (see :mod:`sbprof.measuring.events`):

- ``report_time`` CPU: host time inside PyTorch operators (forward and
  backward), the union of the operator events' intervals on each thread,
  summed over threads, inside the profiled steps. Annotations, Python frames
  and the step markers are not operators, so host time spent outside
  operators (Python, sleeping, data loading) is not in it.
- ``report_time`` CUDA: the durations of the device events (kernels, copies,
  memsets) inside the profiled steps, each counted once.
- ``report_memory``: per profiled step, the highest net bytes allocated
  through PyTorch's allocators since the step began, replaying the raw
  allocation records in time order; the largest over steps.
"""
from __future__ import annotations

from copy import deepcopy
from typing import Any, NamedTuple, Optional, Sequence

from torch import profiler as tprof
from torch.autograd.profiler_util import EventList, FunctionEventAvg

from sbprof.measuring.events import SessionView, device_us, operator_cpu_us, peak_per_window, step_of_label
from sbprof.decorators.step_events import StepEvents
from sbprof.decorators.step_profiler import StepProfiler
from sbprof.base.errors import ConfigError, MeasurementError


class TimeReport(NamedTuple):
    """Host time inside operators and device time of kernels, in microseconds (torch.profiler's unit)."""

    cpu_us: float
    cuda_us: float


class MemoryReport(NamedTuple):
    """Largest per-step peak of net bytes allocated through PyTorch's allocators."""

    cpu_bytes: int
    cuda_bytes: int


def _is_averages(events: Sequence[Any]) -> bool:
    return len(events) > 0 and isinstance(events[0], FunctionEventAvg)


def events_of(source: Any, stage: Optional[str] = None) -> EventList:
    """The events of a profiler, an object with ``.profiler``, or an event list, as given."""
    if isinstance(source, StepProfiler):
        return source.events(stage)
    prof = getattr(source, "profiler", None)
    if isinstance(prof, tprof.profile):
        return events_of(prof, stage)
    if stage is not None:
        raise ConfigError(f"stage={stage!r} needs an sbprof profiler (or an object profiled by sbprof)")
    if isinstance(source, StepEvents) or isinstance(source, EventList):
        return source
    if isinstance(source, tprof.profile):
        if source.profiler is None:
            raise MeasurementError("this torch profiler has recorded nothing yet")
        view = SessionView(source.profiler)
        first = view.function_events
        return StepEvents(view.events_in(view.windows), view.windows, view.memory, use_device=first._use_device,
                          profile_memory=first._profile_memory, with_flops=first._with_flops)
    if isinstance(source, Sequence) and not isinstance(source, str):
        return EventList(list(source))
    raise ConfigError(
        f"expected a torch profiler, an EventList, or an object with a .profiler; got {type(source).__name__}"
    )


def _timed_events(source: Any, stage: Optional[str], what: str) -> EventList:
    events = events_of(source, stage)
    if _is_averages(events):
        raise MeasurementError(f"{what} needs the profiler or its events(), not key_averages(): aggregated "
                               "rows have no times, so overlaps and the order of allocations are lost")
    return events


def report_time(source: Any, verbose: bool = False, stage: Optional[str] = None) -> TimeReport:
    """Host time inside operators and device time of kernels during the profiled steps.

    CPU: the union of operator intervals per thread (forward and backward
    operators; not annotations, Python frames or step markers), so host time
    outside operators is excluded and nested operators count once. CUDA: the
    durations of kernels, copies and memsets, each once (an operator's own
    device time is not added again).

    Arguments
    ---------
    source : profiler, object with ``.profiler``, or its ``events()``
    verbose : bool
        Print the figures in ms.
    stage : str, optional
        Only the steps of this name (a Brain's ``train``/``valid``/``test``).

    Example
    -------
    >>> import time, torch
    >>> from sbprof import profile
    >>> @profile
    ... def run():
    ...     torch.randn(64, 64) @ torch.randn(64, 64)
    ...     time.sleep(0.2)  # host time outside operators: not counted
    >>> 0 < report_time(run()).cpu_us < 200_000  # the sleep's 0.2 s would show; a busy machine only stretches µs
    True
    """
    events = _timed_events(source, stage, "report_time")
    cpu, cuda = operator_cpu_us(events), device_us(events)
    if verbose:
        print(f"CPU time inside operators: {cpu / 1e3:.3f} ms")
        if cuda > 0:
            print(f"CUDA kernel time: {cuda / 1e3:.3f} ms")
    return TimeReport(cpu, cuda)


def report_memory(source: Any, verbose: bool = False, stage: Optional[str] = None) -> MemoryReport:
    """Peak bytes allocated through PyTorch (CPU and CUDA) within one profiled step.

    Replays the raw allocation records of each step in time order from the
    step's start, takes each step's highest running total, and returns the
    largest. Needs ``profile_memory=True``; sees only PyTorch's allocators.

    Example
    -------
    >>> import torch
    >>> from sbprof import profile
    >>> @profile(profile_memory=True)
    ... def run():
    ...     x = torch.ones(2**20)  # 4 MiB
    ...     y = torch.ones(2**20)  # 4 MiB more, both alive
    ...     del x, y
    >>> report_memory(run()).cpu_bytes == 8 * 2**20
    True
    """
    events = _timed_events(source, stage, "report_memory")
    if not getattr(events, "_profile_memory", True):
        raise MeasurementError("report_memory needs a profile made with profile_memory=True")
    if not isinstance(events, StepEvents):
        raise MeasurementError("report_memory needs the profiler (or an sbprof profiler's events()): a plain event "
                               "list charges frees made outside an operator to the enclosing event's start, "
                               "so the true order of allocations is lost")
    peaks = peak_per_window(events.memory, events.windows)
    cpu = max((c for c, _ in peaks), default=0)
    cuda = max((d for _, d in peaks), default=0)
    if verbose:
        print(f"Peak CPU memory in one step: {cpu / 2**20:.2f} MiB")
        if cuda > 0:
            print(f"Peak CUDA memory in one step: {cuda / 2**20:.2f} MiB")
    return MemoryReport(int(cpu), int(cuda))


def _averages(source: Any) -> EventList:
    events = events_of(source)
    return events if _is_averages(events) else events.key_averages()


def events_diff(a: Any, b: Any, filter_by: str = "count") -> tuple:
    """Operators whose ``filter_by`` figure differs between two profiles.

    Takes profilers, profiled objects, ``events()`` or ``key_averages()``
    lists; aggregates by operator and drops the operators present in both
    with an equal value (default: call count), so what is left shows where
    two implementations differ.

    Example
    -------
    >>> import torch
    >>> from sbprof import profile
    >>> @profile
    ... def f(x):
    ...     x.relu()
    >>> @profile
    ... def g(x):
    ...     x.relu().sigmoid()
    >>> x = torch.randn(4)
    >>> only_f, only_g = events_diff(f(x).key_averages(), g(x).key_averages())
    >>> [e.key for e in only_g]
    ['aten::sigmoid']
    """
    # The step labels name the steps, not work: two functions' labels always differ.
    aa = [e for e in deepcopy(_averages(a)) if step_of_label(e.key) is None]
    bb = [e for e in deepcopy(_averages(b)) if step_of_label(e.key) is None]
    if aa and not hasattr(aa[0], filter_by):
        raise ConfigError(f"events have no field {filter_by!r} to compare")
    va = {e.key: getattr(e, filter_by) for e in aa}
    vb = {e.key: getattr(e, filter_by) for e in bb}
    same = {k for k in va if k in vb and va[k] == vb[k]}
    return (EventList([e for e in aa if e.key not in same]), EventList([e for e in bb if e.key not in same]))
