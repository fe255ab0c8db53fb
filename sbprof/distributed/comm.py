"""Communication time of each profiled step, read from the profiler's events.

What counts as communication, by what the profile holds:

- NCCL (GPU): the NCCL kernels (device events whose name holds ``nccl``),
  each once. The host side of an NCCL collective only enqueues it.
- gloo and other CPU backends: each collective is an operator on the calling
  thread (``c10d::allreduce_``, ``c10d::broadcast_``...) that hands the work
  to the backend, whose own thread then records it (``gloo:all_reduce``); the
  caller waits in between, inside no event. So one collective spans from its
  operator's start to the end of its backend event (paired in issue order,
  by kind). A collective without a backend event counts its operator alone.

A step's communication time is the union of those spans inside its window
(overlapping collectives, e.g. DDP's gradient buckets, count once); with
DDP's bucketed all-reduce it overlaps the backward pass.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Deque, Dict, Iterable, List, Sequence, Tuple

from sbprof.measuring.events import is_device_event

HOST_PREFIX = "c10d::"
BACKEND_PREFIXES = ("gloo:", "mpi:", "ucc:")
Span = Tuple[float, float]


def collective_kind(name: str) -> str:
    """The kind of a collective from an operator or backend event name, for pairing the two.

    Example
    -------
    >>> collective_kind("c10d::allreduce_"), collective_kind("gloo:all_reduce"), collective_kind("c10d::barrier")
    ('allreduce', 'allreduce', 'barrier')
    """
    base = name.split("::", 1)[1] if name.startswith(HOST_PREFIX) else name.split(":", 1)[-1]
    return base.strip("_").replace("_", "")


def is_nccl_kernel(event: Any) -> bool:
    """A device event of an NCCL collective (``ncclDevKernel_AllReduce...``, ``ncclKernel_...``)."""
    return is_device_event(event) and "nccl" in event.name.lower()


def collective_spans(events: Iterable[Any]) -> List[Span]:
    """Every collective's span (microseconds on the events' clock): see the module docstring.

    Example
    -------
    >>> from types import SimpleNamespace as E
    >>> def ev(name, a, b): return E(name=name, time_range=E(start=a, end=b), device_type="CPU")
    >>> collective_spans([ev("c10d::allreduce_", 0, 1), ev("gloo:all_reduce", 3, 10), ev("aten::mm", 0, 50)])
    [(0, 10)]
    """
    events = list(events)
    kernels = [(e.time_range.start, e.time_range.end) for e in events if is_nccl_kernel(e)]
    if kernels:
        return sorted(kernels)
    host = sorted((e for e in events if e.name.startswith(HOST_PREFIX)), key=lambda e: e.time_range.start)
    backend: Dict[str, Deque[Any]] = defaultdict(deque)
    for e in sorted((e for e in events if e.name.startswith(BACKEND_PREFIXES)), key=lambda e: e.time_range.start):
        backend[collective_kind(e.name)].append(e)
    spans: List[Span] = []
    for op in host:
        queue = backend[collective_kind(op.name)]
        while queue and queue[0].time_range.start < op.time_range.start:
            orphan = queue.popleft()  # a backend event issued before any operator we saw: counted alone
            spans.append((orphan.time_range.start, orphan.time_range.end))
        end = op.time_range.end
        if queue:
            end = max(end, queue.popleft().time_range.end)
        spans.append((op.time_range.start, end))
    spans += [(e.time_range.start, e.time_range.end) for queue in backend.values() for e in queue]
    return sorted(spans)


def seconds_in(spans: Sequence[Span], window: Span) -> float:
    """Seconds of the union of ``spans`` (microseconds) that lie inside ``window``.

    Example
    -------
    >>> seconds_in([(0, 400), (300, 600), (900, 2000)], (100, 1000))
    0.0006
    """
    lo, hi = window
    total, end = 0.0, lo
    for a, b in spans:
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total / 1e6


def comm_per_window(events: Iterable[Any], windows_us: Sequence[Span]) -> List[float]:
    """Communication seconds inside each window (microseconds on the events' clock), in order."""
    spans = collective_spans(events)
    return [seconds_in(spans, w) for w in windows_us]
