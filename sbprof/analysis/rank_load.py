"""Whether a distributed run's machine was crowded, per host: the ranks' threads against the cores other work left.

Each rank record may hold, over the span of its reported steps, the
machine's busy CPU seconds, the rank's own and the machine's logical cores
(``extra["machine"]``, :mod:`sbprof.distributed.machine_load`). Per host
(and node group): the busy cores are the median over its ranks of busy CPU
seconds / span seconds, the ranks' cores the sum of each rank's own CPU
seconds / span seconds, and **other work** the difference (never below 0).
Without those figures (an older file, a rank rebuilt from its step lines),
other work is the highest 1-minute load average a rank saw less the host's
rank threads, as the train job reads it. The host is **crowded** when its
ranks' threads (each rank's torch threads, summed) plus other work exceed its
logical cores by more than :data:`CROWDED_SLACK`: some thread then waits for a
core, and wall-time figures hold that wait. Ranks on a GPU are not counted (as
the sweep never flags a CUDA setting oversubscribed): their steps are the
device's.

Pure: no torch, no clocks.

Example
-------
>>> acc = HostAccumulator()
>>> acc.add(threads=1, machine={"window_s": 1.0, "busy_cpu_s": 2.0, "own_cpu_s": 0.5, "cores": 2.0}, load=None)
>>> acc.add(threads=1, machine={"window_s": 1.0, "busy_cpu_s": 2.0, "own_cpu_s": 0.5, "cores": 2.0}, load=None)
>>> load = acc.result("vm", 0)
>>> load.others, load.crowded
(1.0, True)
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional

CROWDED_SLACK = 0.25
"""Cores of other work tolerated beyond the free ones: the torchrun agent, the kernel and the ranks' own
bookkeeping keep a few per cent of a core busy on an otherwise idle machine, and the counters tick in 10 ms."""


@dataclass(frozen=True)
class HostLoad:
    """One host's (and node group's) crowding over a section's reported steps (see the module docstring)."""

    host: str
    node_rank: int
    cores: float
    threads: int
    others: Optional[float]
    measured: bool  # others from the CPU counters over the steps (else from the 1-minute load average)
    load_1min: Optional[float] = None

    @property
    def crowded(self) -> bool:
        return self.others is not None and self.threads + self.others > self.cores + CROWDED_SLACK

    @property
    def excess(self) -> float:
        """Threads beyond the free cores (negative: cores to spare)."""
        return self.threads + (self.others or 0.0) - self.cores

    def describe(self) -> str:
        """The load in words, e.g. ``2 rank threads beside 1.0 core of other work on 2 logical cores (vm)``."""
        source = "over the measured steps" if self.measured else "from the 1-minute load average"
        others = "n/a" if self.others is None else f"{self.others:.1f}"
        load = "" if self.load_1min is None else f"; 1-minute load average {self.load_1min:.1f}"
        return (f"{self.threads} rank thread(s) beside {others} core(s) of other work {source}, on {self.cores:g} "
                f"logical cores ({self.host or '?'}, node {self.node_rank}{load})")


@dataclass
class HostAccumulator:
    """A host's ranks of one section, fed one rank at a time (a few numbers each)."""

    threads: int = 0
    cores: Optional[float] = None
    busy: List[float] = field(default_factory=list)  # each rank's reading of the machine's busy cores
    own: float = 0.0  # the ranks' own cores, summed
    unmeasured: int = 0  # ranks without the CPU counters
    load: Optional[float] = None

    def add(self, threads: int, machine: Optional[Mapping[str, Any]], load: Optional[float],
            cores: Optional[int] = None) -> None:
        """One rank: its torch threads, its ``extra["machine"]`` figures (or ``None``), its 1-minute load and the
        logical cores its environment record names."""
        self.threads += max(1, int(threads or 1))
        if isinstance(load, (int, float)):
            self.load = max(load, self.load or 0.0)
        if cores and not self.cores:
            self.cores = float(cores)
        window = float(machine.get("window_s") or 0.0) if machine else 0.0
        if window <= 0:
            self.unmeasured += 1
            return
        self.cores = float(machine.get("cores") or self.cores or 1.0)
        self.busy.append(float(machine.get("busy_cpu_s") or 0.0) / window)
        self.own += float(machine.get("own_cpu_s") or 0.0) / window

    def result(self, host: str, node_rank: int) -> Optional[HostLoad]:
        """The host's :class:`HostLoad`; ``None`` where neither the counters nor the load average nor the cores
        were recorded."""
        if self.cores is None:
            return None
        logical = self.cores
        if self.busy and not self.unmeasured:
            return HostLoad(host, node_rank, logical, self.threads, max(0.0, statistics.median(self.busy) - self.own),
                            True, self.load)
        others = None if self.load is None else max(0.0, self.load - self.threads)
        return HostLoad(host, node_rank, logical, self.threads, others, False, self.load)


def most_crowded(hosts: List[Optional[HostLoad]]) -> Optional[HostLoad]:
    """The host with the most threads beyond its free cores, of those whose other work is known (``None`` for
    none)."""
    known = [h for h in hosts if h is not None and h.others is not None]
    return max(known, key=lambda h: h.excess) if known else None
