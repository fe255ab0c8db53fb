"""The dispatch floor of the dispatch-bound verdict: the CPU cost of the cheapest operator a Python loop can issue.

Its other figure, operators per step, is the count of aten operators the
FLOP step dispatched (:attr:`sbprof.measuring.flops.FlopCounter.operators`: below
autograd, forward, backward and the optimiser's update, views included).
The floor is measured once, after the script, with no profiler running, as the
measured steps ran.

Example
-------
>>> 0 < dispatch_floor(calls=20, repeats=3) < 0.01
True
"""
from __future__ import annotations

import statistics
import time

import torch


def dispatch_floor(calls: int = 100, repeats: int = 7) -> float:
    """The median over ``repeats`` batches of the CPU seconds per call of ``x = x + 1`` on a 1-element tensor:
    the cheapest operator a Python loop issues (the scalar wrapped, the result allocated, the loop's own turn).

    Batches of calls, not single calls: the clock's own cost would otherwise be a good part of each reading.
    """
    per_call = []
    with torch.no_grad():
        for _ in range(repeats):
            x = torch.zeros(1)
            start = time.process_time()
            for _ in range(calls):
                x = x + 1
            per_call.append((time.process_time() - start) / calls)
    return statistics.median(per_call)
