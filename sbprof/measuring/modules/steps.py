"""What the attribution hooks record during one step: plain lists, turned into timelines when read.

The hooks run at every module boundary, so what they store is kept to plain
lists and tuples (cheaper than objects); :meth:`StepRecord.timelines` makes
the :class:`~sbprof.measuring.modules.timeline.StepTimeline` of the host clock and, on
CUDA, of the GPU clock (CUDA events resolved only then).
"""
from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

import torch

from sbprof.measuring.modules.timeline import BackwardMark, Call, StepTimeline

now = time.perf_counter_ns
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
    """What the hooks record during one step (host clock, plus CUDA events when on a GPU)."""

    def __init__(self, name: str, cuda: bool):
        self.name = name
        self.cuda = cuda
        self.calls: List[List[Any]] = []  # [name, parent index, start, end]: lists are cheaper than objects here
        self.call_events: List[List[Any]] = []
        self.seq_starts: List[int] = [sequence_nr()]
        self.seq_owners: List[Optional[int]] = [None]
        self.marks: List[Tuple[int, int]] = []  # (time, sequence number)
        self.mark_events: List[Any] = []
        self.spans: List[Tuple[str, int, int]] = []
        self.span_events: List[Tuple[Any, Any]] = []
        self.last_hooked = -1
        self.node_handles: List[Any] = []
        self.start_event = self.event()
        self.start = now()
        self.end = 0
        self.end_event: Any = None

    def event(self) -> Any:
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def empty(self) -> bool:
        return not self.calls and not self.marks and not self.spans

    def timelines(self) -> Tuple[StepTimeline, Optional[StepTimeline]]:
        """The step on the host clock (ns), and on the GPU clock (ms from the step's start) when on CUDA."""
        host = StepTimeline(self.name, self.start, self.end, [Call(*c) for c in self.calls], self.seq_starts,
                            self.seq_owners, [BackwardMark(*m) for m in self.marks], list(self.spans))
        if not self.cuda:
            return host, None
        self.end_event.synchronize()
        origin = self.start_event

        def at(ev: Any) -> float:
            return origin.elapsed_time(ev)

        calls = [Call(c[0], c[1], at(a), at(b)) for c, (a, b) in zip(self.calls, self.call_events)]
        marks = [BackwardMark(at(ev), m[1]) for m, ev in zip(self.marks, self.mark_events)]
        spans = [(label, at(a), at(b)) for (label, _, _), (a, b) in zip(self.spans, self.span_events)]
        return host, StepTimeline(self.name, 0.0, at(self.end_event), calls, self.seq_starts, self.seq_owners,
                                  marks, spans)
