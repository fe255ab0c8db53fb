"""A scaling study over world sizes: speed-up, efficiency and oversubscription against world size 1, from each
world size's section summaries.

Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.rank_sections import SectionSummary


@dataclass(frozen=True)
class ScalingRow:
    """One world size of a scaling study (throughput over runs: median)."""

    world_size: int
    processes: int
    cores: int
    utterances_per_s: Optional[float]
    audio_s_per_s: Optional[float]
    speedup: Optional[float]
    efficiency: Optional[float]
    imbalance: Optional[float]
    comm_share: Optional[float]
    runs: int = 1
    step_s: Optional[float] = None  # global step (longest over ranks), median over steps and runs
    step_q1: Optional[float] = None
    step_q3: Optional[float] = None
    load: Optional[float] = None  # highest 1-minute load average seen by a rank at its end

    @property
    def oversubscribed(self) -> bool:
        """More busy threads (ranks x threads per rank) than the machine's logical cores."""
        return self.processes > self.cores

    @property
    def busy_machine(self) -> bool:
        """The machine's load reached its logical cores: other work shared them with the ranks."""
        return self.load is not None and self.load >= self.cores


def scaling_rows(points: Sequence[Tuple[int, int, int, Optional[SectionSummary]]]) -> List[ScalingRow]:
    """Speed-up and efficiency against world size 1 from ``(world size, threads per rank, cores, summary)``.

    Speed-up = throughput at N / throughput at 1 (utterances per second); efficiency = speed-up / N.
    With a fixed global batch (strong scaling) ideal is N; with a fixed per-rank batch (weak) too.

    Example
    -------
    >>> from sbprof.analysis.rank_sections import Throughput
    >>> s = lambda u: SectionSummary("k", 1, [], [], [], None, None, 1.0, 0.0, 0.1, None, None, None,
    ...                              Throughput(3, u, None, 1.0))
    >>> rows = scaling_rows([(1, 1, 2, s(10.0)), (2, 1, 2, s(15.0)), (4, 1, 2, s(16.0))])
    >>> [(r.speedup, r.efficiency, r.oversubscribed) for r in rows]
    [(1.0, 1.0, False), (1.5, 0.75, False), (1.6, 0.4, True)]
    """
    by_size: Dict[int, List[Tuple[int, int, Optional[SectionSummary]]]] = {}
    for size, threads, cores, summary in points:
        by_size.setdefault(size, []).append((threads, cores, summary))

    def median_of(values: List[Optional[float]]) -> Optional[float]:
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    rows = []
    for size in sorted(by_size):
        entries = by_size[size]
        tps = [s.throughput for _, _, s in entries if s is not None and s.throughput is not None]
        summaries = [s for _, _, s in entries if s is not None]
        steps = [s.throughput for s in summaries if s.throughput is not None]
        loads = [s.load for s in summaries if s.load is not None]
        rows.append(ScalingRow(
            world_size=size, processes=size * entries[0][0], cores=entries[0][1],
            utterances_per_s=median_of([t.utterances_per_s for t in tps]),
            audio_s_per_s=median_of([t.audio_s_per_s for t in tps]), speedup=None, efficiency=None,
            imbalance=median_of([s.imbalance for s in summaries]) if size > 1 else None,
            comm_share=median_of([s.comm_share for s in summaries]) if size > 1 else None, runs=len(entries),
            step_s=median_of([t.step_s for t in steps]), step_q1=median_of([t.step_q1 for t in steps]),
            step_q3=median_of([t.step_q3 for t in steps]), load=max(loads) if loads else None))
    base = next((r.utterances_per_s for r in rows if r.world_size == 1), None)
    out = []
    for r in rows:
        speedup = None if base is None or r.utterances_per_s is None else r.utterances_per_s / base
        out.append(ScalingRow(r.world_size, r.processes, r.cores, r.utterances_per_s, r.audio_s_per_s, speedup,
                              None if speedup is None else speedup / r.world_size, r.imbalance, r.comm_share,
                              r.runs, r.step_s, r.step_q1, r.step_q3, r.load))
    return out
