"""How crowded the machine was while a rank's reported steps ran: the machine's busy CPU time and the rank's own.

At the end of each step (after its clocks stopped) a rank reads two
counters (:func:`~sbprof.measuring.env.cpu_counters`): the CPU seconds every
core of the machine has been busy, and its own process's. Over the span of a
step name's reported steps (from the end of the step before the first
reported one, else the first reported one, to the end of the last) their
differences say how many cores were busy, and how many of them this rank kept
busy. The merge subtracts every rank of a host from the machine's busy cores:
the rest is other work (:mod:`sbprof.analysis.rank_load`), which decides
whether the ranks' threads outnumbered the free cores. The kernel counts in
ticks (10 ms): the span is summed over several steps before it is divided.
"""
from __future__ import annotations

import os
import time
from typing import Dict, List, Optional, Tuple

from sbprof.measuring.env import cpu_counters

Reading = Tuple[float, float, float]  # perf_counter, machine busy CPU s, own process CPU s


class MachineLoad:
    """The counters at the edges of each step name's reported span (see the module docstring).

    Example
    -------
    >>> load = MachineLoad()
    >>> load.mark("train", reported=False); load.mark("train", reported=True)
    >>> figures = load.figures("train")
    >>> figures is None or (figures["window_s"] >= 0 and figures["cores"] >= 1)
    True
    """

    def __init__(self) -> None:
        self._spans: Dict[str, List[Optional[Reading]]] = {}

    def mark(self, name: str, reported: bool) -> None:
        """A step of ``name`` ended (``reported``: one of the figures)."""
        span = self._spans.setdefault(name, [None, None])
        if span[1] is not None and not reported:
            return  # after the reported steps: outside the span
        counters = cpu_counters()
        if counters is None:
            return
        reading = (time.perf_counter(), *counters)
        if not reported or span[0] is None:
            span[0] = reading
        if reported:
            span[1] = reading

    def figures(self, name: str) -> Optional[Dict[str, float]]:
        """The span's wall seconds, the machine's busy CPU seconds and this process's over it, and the machine's
        logical cores; ``None`` without two readings."""
        first, last = self._spans.get(name, [None, None])
        if first is None or last is None or last[0] <= first[0]:
            return None
        return {"window_s": last[0] - first[0], "busy_cpu_s": last[1] - first[1], "own_cpu_s": last[2] - first[2],
                "cores": float(os.cpu_count() or 1)}
