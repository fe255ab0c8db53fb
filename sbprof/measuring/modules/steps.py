"""What the attribution hooks record during one step: plain lists, turned into timelines when read.

The hooks run at every module boundary, so what they store is kept to plain
lists and tuples (cheaper than objects); :meth:`StepRecord.timelines` makes
the :class:`~sbprof.measuring.modules.timeline.StepTimeline` of the host clock, of the
process CPU clock and, on CUDA, of the GPU clock (CUDA events resolved only then).

The CPU clock (``time.process_time_ns``) is read at the same boundaries as the
host clock: it counts every thread of the process (intra-op and OpenMP workers,
the autograd engine), so a module's CPU time is what the process burnt while
that module ran, measured, not apportioned. On Linux it is one system call
(about 0.3 us here; the host clock is read in user space).
"""
from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

import torch

from sbprof.measuring.modules.timeline import BackwardMark, Call, StepTimeline

now = time.perf_counter_ns
cpu_now = time.process_time_ns
sequence_nr = torch._C._autograd._get_sequence_nr
"""The sequence number the next autograd node made on this thread will get."""


def newest_node(values: Any) -> Tuple[Any, int]:
    """The autograd node with the highest sequence number among the tensors in ``values`` (one level deep).

    Example
    -------
    >>> x = torch.ones(2, requires_grad=True)
    >>> a = x * 2
    >>> b = a + 1
    >>> newest_node([a, (b, None)])[0] is b.grad_fn, newest_node([x])
    (True, (None, -1))
    """
    best, best_seq = None, -1
    for value in values:
        if isinstance(value, torch.Tensor):
            node = value.grad_fn
            if node is not None:
                seq = node._sequence_nr()
                if seq > best_seq:
                    best, best_seq = node, seq
        elif isinstance(value, (tuple, list)):
            node, seq = newest_node(value)
            if seq > best_seq:
                best, best_seq = node, seq
    return best, best_seq


class StepRecord:
    """What the hooks record during one step (host and process CPU clocks, plus CUDA events when on a GPU)."""

    def __init__(self, name: str, cuda: bool):
        self.name = name
        self.cuda = cuda
        # [name, parent index, start, end, cpu start, cpu end]: lists are cheaper than objects here
        self.calls: List[List[Any]] = []
        self.call_events: List[List[Any]] = []
        self.seq_starts: List[int] = [sequence_nr()]
        self.seq_owners: List[Optional[int]] = [None]
        self.marks: List[Tuple[int, int, int]] = []  # (time, sequence number, cpu time)
        self.mark_events: List[Any] = []
        self.spans: List[Tuple[str, int, int, int, int]] = []  # (label, start, end, cpu start, cpu end)
        self.span_events: List[Tuple[Any, Any]] = []
        self.last_hooked = -1
        self.node_handles: List[Any] = []
        self.start_event = self.event()
        self.cpu_start = cpu_now()
        self.start = now()
        self.end = 0
        self.cpu_end = 0
        self.end_event: Any = None

    def event(self) -> Any:
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def empty(self) -> bool:
        return not self.calls and not self.marks and not self.spans

    def timelines(self) -> Tuple[StepTimeline, StepTimeline, Optional[StepTimeline]]:
        """The step on the host clock (ns), on the process CPU clock (ns), and on the GPU clock (ms from the
        step's start) when on CUDA."""
        host = StepTimeline(self.name, self.start, self.end, [Call(*c[:4]) for c in self.calls], self.seq_starts,
                            self.seq_owners, [BackwardMark(m[0], m[1]) for m in self.marks],
                            [s[:3] for s in self.spans])
        cpu = StepTimeline(self.name, self.cpu_start, self.cpu_end,
                           [Call(c[0], c[1], c[4], c[5]) for c in self.calls], self.seq_starts, self.seq_owners,
                           [BackwardMark(m[2], m[1]) for m in self.marks], [(s[0], s[3], s[4]) for s in self.spans])
        if not self.cuda:
            return host, cpu, None
        self.end_event.synchronize()
        origin = self.start_event

        def at(ev: Any) -> float:
            return origin.elapsed_time(ev)

        calls = [Call(c[0], c[1], at(a), at(b)) for c, (a, b) in zip(self.calls, self.call_events)]
        marks = [BackwardMark(at(ev), m[1]) for m, ev in zip(self.marks, self.mark_events)]
        spans = [(s[0], at(a), at(b)) for s, (a, b) in zip(self.spans, self.span_events)]
        return host, cpu, StepTimeline(self.name, 0.0, at(self.end_event), calls, self.seq_starts,
                                       self.seq_owners, marks, spans)
