"""The CPU of a training loop's whole iteration, this process's and its DataLoader workers': sampled at each
step's end.

A step's own ``cpu_s`` is this process's CPU from the step's start to its
end; the data wait and the time between steps are outside it, and so is
every DataLoader worker (a child process). :class:`LoopCPU` reads, at each
step's end, this process's CPU (``time.process_time``) and the user +
system CPU of each live child process (``psutil``), and gives the CPU
spent since the previous step's end: the whole loop's iteration (wait,
between, step), with the workers' share apart. A child is accounted by its
own id from the first time it is seen (a worker started within the
iteration counts from its start); the CPU a worker spends after the last
sample before it exits is not seen.

Example
-------
>>> import time
>>> loop = LoopCPU()
>>> _ = loop.sample(); t = time.process_time()
>>> while time.process_time() - t < 0.02: pass
>>> main, workers = loop.sample()
>>> main >= 0.02 and workers == 0.0
True
"""
from __future__ import annotations

import glob
import os
import time
from typing import Dict, List, Optional, Tuple

import psutil


class LoopCPU:
    """CPU since the previous sample: ``(this process's, its child processes')`` seconds (module docstring)."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._main: Optional[float] = None
        self._seen: Dict[Tuple[int, float], float] = {}  # (pid, start time) -> CPU seen at the last sample

    def _children(self) -> List[psutil.Process]:
        """This process's descendants: from Linux's ``/proc/PID/task/TID/children`` lists (a few small reads),
        else psutil's scan of every process (about 2 ms a call on a busy machine)."""
        if not os.path.exists(f"/proc/{self._me.pid}/task/{self._me.pid}/children"):
            return self._me.children(recursive=True)
        out: List[psutil.Process] = []
        todo = [self._me.pid]
        while todo:
            pid = todo.pop()
            for path in glob.glob(f"/proc/{pid}/task/*/children"):
                try:
                    with open(path) as f:
                        kids = [int(k) for k in f.read().split()]
                except OSError:  # the task ended
                    continue
                todo += kids
                for kid in kids:
                    try:
                        out.append(psutil.Process(kid))
                    except psutil.Error:  # it ended since the list was read
                        pass
        return out

    def _child_cpu(self) -> Dict[Tuple[int, float], float]:
        out = {}
        for child in self._children():
            try:
                with child.oneshot():
                    times = child.cpu_times()
                    out[(child.pid, child.create_time())] = times.user + times.system
            except psutil.Error:  # ended between the listing and the reading
                continue
        return out

    def exclude(self, cpu_s: float) -> None:
        """This process's ``cpu_s`` since the last sample were not the loop's (sbprof's own work): the next sample
        leaves them out."""
        if self._main is not None:
            self._main += cpu_s

    def sample(self) -> Tuple[float, float]:
        """CPU seconds since the previous sample (the first: ``(0.0, 0.0)``, the baseline)."""
        main, children = time.process_time(), self._child_cpu()
        first = self._main is None
        spent = 0.0 if first else main - self._main
        workers = 0.0 if first else sum(cpu - self._seen.get(key, 0.0) for key, cpu in children.items())
        self._main, self._seen = time.process_time(), children  # the sampling's own CPU is not the loop's
        return spent, max(workers, 0.0)
