"""The two figures of the dispatch-bound verdict: operators per step, counted in the torch.profiler events of the
measured steps, and the dispatch floor, the CPU cost of the cheapest operator a Python loop can issue in this
process.

Each measured step is marked in the trace by a ``record_function`` named :data:`STEP_MARK` + its stage; an
operator counts for a step when it is top-level inside the mark: an ``aten::`` event with no other ``aten::``
event between it and the mark (an ``aten::linear`` counts once, not with the ``aten::addmm`` it calls).

Example
-------
>>> import torch
>>> with torch.profiler.profile() as p:
...     for _ in range(2):
...         with torch.profiler.record_function(STEP_MARK + "train"):
...             x = torch.zeros(1)
...             for _ in range(10):
...                 x = x + 1
>>> operators_per_step(p.events())
{'train': 11.0}
>>> 0 < dispatch_floor(calls=20, repeats=3) < 0.01
True
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Dict, Iterable

import torch

STEP_MARK = "sbprof.step: "
"""The name of a measured step's mark in the trace, before its stage's name."""
FLOOR_MARK = "sbprof.dispatch_floor"


def operators_per_step(events: Iterable[Any]) -> Dict[str, float]:
    """Per stage with marked steps: the top-level ``aten::`` operators inside its marks, divided by its marks."""
    marks: Dict[str, int] = {}
    operators: Dict[str, int] = {}
    for event in events:
        if event.name.startswith(STEP_MARK):
            stage = event.name[len(STEP_MARK):]
            marks[stage] = marks.get(stage, 0) + 1
            continue
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith(("aten::", STEP_MARK)):
            parent = parent.cpu_parent
        if parent is not None and parent.name.startswith(STEP_MARK):
            stage = parent.name[len(STEP_MARK):]
            operators[stage] = operators.get(stage, 0) + 1
    return {stage: operators.get(stage, 0) / n for stage, n in marks.items()}


def dispatch_floor(calls: int = 100, repeats: int = 7) -> float:
    """The median over ``repeats`` batches of the CPU seconds per call of ``x = x + 1`` on a 1-element tensor:
    the cheapest operator a Python loop issues (the scalar wrapped, the result allocated, the loop's own turn).

    Batches of calls, not single calls: the clock's own cost would otherwise be a good part of each reading.
    Marked :data:`FLOOR_MARK` in a trace, so that its operators are not mistaken for the script's.
    """
    per_call = []
    with torch.profiler.record_function(FLOOR_MARK), torch.no_grad():
        for _ in range(repeats):
            x = torch.zeros(1)
            start = time.process_time()
            for _ in range(calls):
                x = x + 1
            per_call.append((time.process_time() - start) / calls)
    return statistics.median(per_call)
