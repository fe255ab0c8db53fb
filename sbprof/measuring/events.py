"""Reading torch.profiler results truthfully: step windows, operator time, device time, memory.

torch's own summaries mislead in three ways this module avoids:

- ``FunctionEvent.self_cpu_time_total`` of a ``ProfilerStep#N`` or of a
  Python-function event is host time *outside* operators, and with stacks on
  operators do not always nest under the step, so summing self times over
  every event counts time twice or counts idle host time;
- an operator's ``self_device_time_total`` already holds its kernels, which are
  also in the list as device events: summing both counts each kernel twice;
- memory records made outside an operator are charged to the enclosing event
  and placed at *its* start, before the allocations they free, which hides
  peaks. The raw kineto records keep each allocation and free at its own time.

So figures here come from intervals and raw records: host operator time is the
union of the operator events' intervals per thread; device time is the sum of
the device events' durations, each counted once; memory peaks replay the raw
allocation records of each step in time order.

Every profiled step is wrapped in a ``record_function`` label
(:func:`step_label`), so a step is a window ``[start, end]`` on the kineto
clock, whatever happened around it (validation batches, the user's own loop).
Steps that are recorded only so that the next ones are read right (a
schedule's warm-up: see :mod:`sbprof.decorators.stage_schedule`) carry
:func:`warmup_label` instead; a window that turns out not to be a step once it
ends (the tail of a loop after its last ``sbprof.step()``, a step that raised)
holds a :data:`DISCARD_LABEL` marker. Neither is a step window.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

STEP_LABEL_PREFIX = "sbprof.step:"
WARMUP_LABEL_PREFIX = "sbprof.warmup:"
DISCARD_LABEL = "sbprof.discard"
_PYTHON_FRAME = re.compile(r"^(<built-in |.*\.py\(\d+\): |nn\.Module: |torch/)")
MEMORY_EVENT = "[memory]"
_DEVICE_TYPES = ("CUDA", "PrivateUse1", "XPU", "HIP", "MPS")


def step_label(step: str) -> str:
    """The ``record_function`` name that marks one profiled step in traces.

    Example
    -------
    >>> step_label("train"), step_of_label("sbprof.step:train"), step_of_label("aten::mm")
    ('sbprof.step:train', 'train', None)
    """
    return STEP_LABEL_PREFIX + step


def warmup_label(step: str) -> str:
    """The label of a step recorded but left out of every figure (a schedule's warm-up).

    Example
    -------
    >>> warmup_label("train"), step_of_label(warmup_label("train"))
    ('sbprof.warmup:train', None)
    """
    return WARMUP_LABEL_PREFIX + step


def step_of_label(name: str) -> Optional[str]:
    """The step name a label marks, or ``None`` for any other event name."""
    return name[len(STEP_LABEL_PREFIX):] if name.startswith(STEP_LABEL_PREFIX) else None


@dataclass(frozen=True)
class StepWindow:
    """One profiled step on the kineto clock (nanoseconds)."""

    step: str
    start_ns: int
    end_ns: int

    def holds(self, start_ns: float, end_ns: float) -> bool:
        return self.start_ns <= start_ns and end_ns <= self.end_ns


@dataclass(frozen=True)
class MemoryRecord:
    """One allocation (positive) or free (negative) through PyTorch's allocators."""

    time_ns: int
    cpu_bytes: int
    device_bytes: int


def _device_name(device_type: Any) -> str:
    return getattr(device_type, "name", str(device_type))


def is_device_event(event: Any) -> bool:
    """A kernel, copy or memset that ran on an accelerator (not a host-side event, nor the copy of a
    ``record_function`` range that the profiler draws on the device's timeline around the kernels)."""
    if getattr(event, "activity_type", None) == "gpu_user_annotation" or getattr(event, "is_user_annotation", False):
        return False
    return _device_name(event.device_type) in _DEVICE_TYPES


def is_operator(event: Any) -> bool:
    """A PyTorch operator run by the host (forward or backward), not an annotation or frame."""
    kind = getattr(event, "activity_type", None)
    if kind is not None:
        return kind == "cpu_op"
    # torch < 2.9 has no activity_type: exclude what is known not to be an operator.
    return (not is_device_event(event) and not event.is_user_annotation and not event.is_async
            and event.name != MEMORY_EVENT and not event.name.startswith("ProfilerStep")
            and not getattr(event, "is_python_function", False) and not _PYTHON_FRAME.match(event.name))


def union_us(intervals: Iterable[Tuple[float, float]]) -> float:
    """Total length covered by intervals, overlaps counted once.

    Example
    -------
    >>> union_us([(0, 10), (5, 12), (20, 21)])
    13
    """
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def operator_cpu_us(events: Sequence[Any]) -> float:
    """Host time inside operators: union of operator intervals on each thread, summed over threads."""
    by_thread: Dict[int, List[Tuple[float, float]]] = {}
    for e in events:
        if is_operator(e):
            by_thread.setdefault(e.thread, []).append((e.time_range.start, e.time_range.end))
    return float(sum(union_us(v) for v in by_thread.values()))


def device_us(events: Sequence[Any]) -> float:
    """Time the device was busy with kernels, copies and memsets: their intervals' union, so work that overlaps
    (several streams) is counted once.

    Example
    -------
    >>> from torch.autograd import DeviceType
    >>> from torch.autograd.profiler_util import FunctionEvent
    >>> k1 = FunctionEvent(1, "gemm", 7, 10, 50, device_type=DeviceType.CUDA, activity_type="kernel")
    >>> k2 = FunctionEvent(2, "add", 8, 40, 60, device_type=DeviceType.CUDA, activity_type="kernel")
    >>> mark = FunctionEvent(3, "batch", 7, 5, 70, device_type=DeviceType.CUDA, activity_type="gpu_user_annotation")
    >>> device_us([k1, k2, mark])
    50.0
    """
    return float(union_us((e.time_range.start, e.time_range.end) for e in events if is_device_event(e)))


def _on_device(kineto_event: Any) -> bool:
    """Whether a kineto event lies on an accelerator's timeline (its kernels, copies, mirrored ranges)."""
    device_type = getattr(kineto_event, "device_type", None)
    return device_type is not None and _device_name(device_type()) in _DEVICE_TYPES


def memory_records(kineto_events: Iterable[Any]) -> List[MemoryRecord]:
    """The raw allocation records of a kineto session, in time order."""
    records = []
    for e in kineto_events:
        if e.name() != MEMORY_EVENT:
            continue
        on_device = _on_device(e)
        records.append(MemoryRecord(e.start_ns(), 0 if on_device else e.nbytes(), e.nbytes() if on_device else 0))
    records.sort(key=lambda r: r.time_ns)
    return records


def step_windows(kineto_events: Iterable[Any]) -> List[StepWindow]:
    """The labelled steps of a kineto session, in time order, less those holding a discard marker."""
    windows, discards = [], []
    for e in kineto_events:
        # A record_function range is drawn twice on a GPU: on the host, and mirrored on the device's timeline
        # around its kernels (activity gpu_user_annotation, which is_user_annotation() also answers True for).
        # Only the host range is the step; the mirror would count each step twice, shifted to its kernels.
        if not e.is_user_annotation() or _on_device(e):
            continue
        step = step_of_label(e.name())
        if step is not None:
            windows.append(StepWindow(step, e.start_ns(), e.end_ns()))
        elif e.name() == DISCARD_LABEL:
            discards.append(e.start_ns())
    windows.sort(key=lambda w: w.start_ns)
    for t in discards:  # the marker belongs to the innermost window holding it (a step may nest in another)
        holding = [w for w in windows if w.start_ns <= t <= w.end_ns]
        if holding:
            windows.remove(holding[-1])
    return windows


def peak_per_window(records: Sequence[MemoryRecord], windows: Sequence[StepWindow]) -> List[Tuple[int, int]]:
    """Per window, the highest net bytes allocated since the window began (CPU, device).

    Each window starts from zero, so memory held before a step (weights,
    earlier steps) is not counted, while what the step allocates and keeps is:
    the same definition as a CUDA allocator peak minus the allocation at the
    step's start.

    Example
    -------
    >>> recs = [MemoryRecord(1, 16, 0), MemoryRecord(2, 16, 0), MemoryRecord(3, -16, 0), MemoryRecord(4, -16, 0)]
    >>> peak_per_window(recs, [StepWindow("s", 0, 10)])
    [(32, 0)]
    """
    times = [r.time_ns for r in records]
    peaks = []
    for w in windows:
        cpu = dev = peak_cpu = peak_dev = 0
        for r in records[bisect.bisect_left(times, w.start_ns):bisect.bisect_right(times, w.end_ns)]:
            cpu += r.cpu_bytes
            dev += r.device_bytes
            peak_cpu, peak_dev = max(peak_cpu, cpu), max(peak_dev, dev)
        peaks.append((peak_cpu, peak_dev))
    return peaks


class SessionView:
    """One finished kineto session, read once: events on a shared clock, windows, memory.

    Arguments
    ---------
    session : torch.autograd.profiler.profile
        A stopped session (what ``torch.profiler.profile.profiler`` holds).
    origin_ns : int
        The clock origin shared by every session of one profiler: event
        times are shifted so that sessions line up instead of interleaving.
    labelled : bool
        The session's steps are all labelled (an sbprof profiler's): a
        session without a step window then holds no step. Otherwise a
        session without labels is read as one step.
    """

    def __init__(self, session: Any, origin_ns: Optional[int] = None, labelled: bool = False):
        results = session.kineto_results
        raw = list(results.events())
        start_ns = results.trace_start_ns()
        self.origin_ns = start_ns if origin_ns is None else origin_ns
        shift_us = (start_ns - self.origin_ns) / 1000
        self.function_events = session.function_events
        if shift_us:
            for e in self.function_events:
                e.time_range.start += shift_us
                e.time_range.end += shift_us
        self.windows = step_windows(raw)
        self.memory = memory_records(raw)
        if not self.windows and raw and not labelled:  # a plain torch profiler's session: one step
            self.windows = [StepWindow("session", min(e.start_ns() for e in raw), max(e.end_ns() for e in raw))]

    def to_us(self, ns: int) -> float:
        """A kineto timestamp on this view's event clock (microseconds from the origin)."""
        return (ns - self.origin_ns) / 1000

    def events_in(self, windows: Sequence[StepWindow]) -> List[Any]:
        """Events inside the given windows, plus the ``ProfilerStep#N`` markers holding them."""
        spans = [(self.to_us(w.start_ns), self.to_us(w.end_ns)) for w in windows]
        if not spans:
            return []
        starts = [s for s, _ in spans]
        kept = []
        for e in self.function_events:
            a, b = e.time_range.start, e.time_range.end
            i = bisect.bisect_right(starts, a) - 1
            # A kernel belongs to the step it started in: the step synchronises
            # before its label closes, but device and host clocks are aligned, not equal.
            inside = i >= 0 and (a if is_device_event(e) else b) <= spans[i][1]
            if inside or (e.name.startswith("ProfilerStep") and any(a <= s and t <= b for s, t in spans)):
                kept.append(e)
        return kept
