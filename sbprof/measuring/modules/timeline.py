"""From the raw boundary times of one step to per-module forward and backward times.

What the hooks record (see :mod:`sbprof.measuring.modules.attribution`) is plain data,
so this module is pure arithmetic, testable with made-up times:

- forward: one :class:`Call` per selected-module call, with its start and end
  and the call it ran inside (``parent``);
- autograd sequence-number boundaries: at every module entry and exit, the
  sequence number the next autograd node will get, and which call owns the
  nodes made from there on (``seq_starts``/``seq_owners``);
- backward: :class:`BackwardMark` times, each when a hooked autograd node
  started (with its sequence number) or when a backward pass ended.

Why sequence numbers place backward time. On one thread the autograd engine
runs the nodes of a graph in decreasing sequence number (its ready queue
prefers the highest; a node's inputs always have lower numbers than its
consumers, so the highest pending node is always ready; gradient
accumulation into parameters runs at once, inside the producing node's
stretch). The nodes a module's forward created hold one contiguous range of
numbers, so its backward is one contiguous stretch of time. The hooks mark
the node where each stretch begins (the one holding a module's outputs, the
one holding its inputs); each interval between two marks belongs to the
module whose range holds the first mark's node. A boundary with no mark
(a module whose input needs no gradient) ends at the next mark, or at the end
of the backward pass. torch's own module trackers (``ModTracker``,
``ModuleTracker``) follow backward with multi-grad hooks on a module's inputs,
so they leave a module whose inputs need no gradient only when the whole
backward ends; this partition has no such blind spot.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

END_OF_BACKWARD = -1
"""Sequence number of the mark taken when a backward pass ends."""


@dataclass
class Call:
    """One call of a selected module: forward start and end (any clock), and the call it ran in."""

    name: str
    parent: Optional[int]
    start: float
    end: float = float("nan")


@dataclass(frozen=True)
class BackwardMark:
    """A hooked autograd node started (``seq`` its sequence number), or a backward ended (``END_OF_BACKWARD``)."""

    time: float
    seq: int


@dataclass
class StepTimeline:
    """Everything one step's hooks recorded, on one clock."""

    name: str
    start: float
    end: float
    calls: List[Call] = field(default_factory=list)
    seq_starts: List[int] = field(default_factory=list)
    seq_owners: List[Optional[int]] = field(default_factory=list)
    marks: List[BackwardMark] = field(default_factory=list)
    spans: List[Tuple[str, float, float]] = field(default_factory=list)
    """Other timed regions of the step (e.g. ``optimizer``): label, start, end."""


@dataclass
class LabelTimes:
    """Summed times of one label over the calls of one or more steps (clock units)."""

    calls: int = 0
    forward: float = 0.0
    forward_self: float = 0.0
    backward: float = 0.0
    backward_self: float = 0.0

    def add(self, other: "LabelTimes") -> None:
        self.calls += other.calls
        self.forward += other.forward
        self.forward_self += other.forward_self
        self.backward += other.backward
        self.backward_self += other.backward_self


def owner_of(seq: int, starts: Sequence[int], owners: Sequence[Optional[int]]) -> Optional[int]:
    """The call whose forward made the autograd node numbered ``seq`` (``None``: no selected module).

    Example
    -------
    >>> owner_of(5, [0, 4, 9], [None, 0, None]), owner_of(9, [0, 4, 9], [None, 0, None])
    (0, None)
    """
    index = bisect.bisect_right(starts, seq) - 1
    return owners[index] if index >= 0 else None


def backward_self(timeline: StepTimeline) -> Tuple[List[float], float]:
    """Backward time owned by each call itself, and the backward time owned by no selected module.

    Example
    -------
    >>> t = StepTimeline("s", 0, 100, calls=[Call("a", None, 0, 10)], seq_starts=[0, 3, 7],
    ...                  seq_owners=[None, 0, None],
    ...                  marks=[BackwardMark(20, 8), BackwardMark(25, 6), BackwardMark(40, 2),
    ...                         BackwardMark(45, END_OF_BACKWARD)])
    >>> backward_self(t)
    ([15.0], 10.0)
    """
    own = [0.0] * len(timeline.calls)
    outside = 0.0
    marks = timeline.marks
    for mark, following in zip(marks, marks[1:]):
        if mark.seq == END_OF_BACKWARD:
            continue
        length = float(following.time - mark.time)
        owner = owner_of(mark.seq, timeline.seq_starts, timeline.seq_owners)
        if owner is None:
            outside += length
        else:
            own[owner] += length
    return own, outside


def call_totals(timeline: StepTimeline) -> Tuple[List[float], List[float], List[float]]:
    """Per call: forward total, backward total (its own and its inner calls'), backward self."""
    calls = timeline.calls
    own_bwd, _ = backward_self(timeline)
    fwd = [float(c.end - c.start) for c in calls]
    bwd = list(own_bwd)
    # Calls are recorded in the order they start: an inner call always after the one it runs in.
    for index in range(len(calls) - 1, -1, -1):
        parent = calls[index].parent
        if parent is not None:
            bwd[parent] += bwd[index]
    return fwd, bwd, own_bwd


def label_times(timeline: StepTimeline) -> Dict[str, LabelTimes]:
    """Per label (module name), calls and forward/backward total and self times of one step.

    Totals include the calls made inside (``Call.parent``); self times do not.

    Example
    -------
    >>> t = StepTimeline("s", 0, 100, calls=[Call("enc", None, 0, 30), Call("enc.l0", 0, 5, 20)],
    ...                  seq_starts=[0, 1, 4, 6], seq_owners=[None, 0, 1, 0],
    ...                  marks=[BackwardMark(50, 6), BackwardMark(52, 5), BackwardMark(60, 3),
    ...                         BackwardMark(70, END_OF_BACKWARD)])
    >>> times = label_times(t)
    >>> (times["enc"].forward, times["enc"].forward_self, times["enc"].backward, times["enc"].backward_self)
    (30.0, 15.0, 20.0, 12.0)
    >>> times["enc.l0"].backward
    8.0
    """
    fwd, bwd, own_bwd = call_totals(timeline)
    inner_fwd = [0.0] * len(fwd)
    for index, call in enumerate(timeline.calls):
        if call.parent is not None:
            inner_fwd[call.parent] += fwd[index]
    times: Dict[str, LabelTimes] = {}
    for index, call in enumerate(timeline.calls):
        row = times.setdefault(call.name, LabelTimes())
        row.add(LabelTimes(1, fwd[index], fwd[index] - inner_fwd[index], bwd[index], own_bwd[index]))
    return times


def top_level_time(timeline: StepTimeline) -> float:
    """Forward and backward time of the outermost selected calls, plus the step's other spans.

    What the step spent outside them (:attr:`StepTimeline.end` - ``start`` minus
    this) is time outside every selected module: data moves, code between
    modules, the start of the backward engine, and the hooks themselves.

    Example
    -------
    >>> t = StepTimeline("s", 0, 100, calls=[Call("a", None, 0, 30)], seq_starts=[0, 1], seq_owners=[None, 0],
    ...                  marks=[BackwardMark(50, 1), BackwardMark(70, END_OF_BACKWARD)],
    ...                  spans=[("optimizer", 80, 90)])
    >>> top_level_time(t)
    60.0
    """
    fwd, bwd, _ = call_totals(timeline)
    total = sum(float(end - start) for _, start, end in timeline.spans)
    return total + sum(fwd[i] + bwd[i] for i, call in enumerate(timeline.calls) if call.parent is None)
