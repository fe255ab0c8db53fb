"""One section (a profiled target) over every rank of a run: its summary, and the figures in it: the slowest
rank's straggler cost, the ranks per host, the ranks shown, the world's throughput.

Definitions: :mod:`sbprof.analysis.distributed`. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from sbprof.analysis.rank_load import HostLoad
from sbprof.analysis.rank_rows import RankRow, StepTotals
from sbprof.base.stats import summarise

SHOW_ALL_RANKS = 32
"""Up to this many ranks the report lists every one; beyond, the slowest and fastest (every rank in the CSV)."""
SHOWN_EACH_SIDE = 8


@dataclass(frozen=True)
class HostRow:
    """The ranks of one host (and node rank: two node groups may share a host)."""

    host: str
    node_rank: int
    ranks: List[int]
    busy_median_s: float
    busy_max_s: float
    comm_share: Optional[float]
    wait_max_s: Optional[float]
    peak_max_bytes: Optional[int]


@dataclass(frozen=True)
class Throughput:
    """Utterances and audio seconds trained per second by the whole world (see :mod:`sbprof.analysis.distributed`)."""

    steps: int
    utterances_per_s: float
    audio_s_per_s: Optional[float]
    step_s: float
    step_q1: Optional[float] = None
    step_q3: Optional[float] = None


@dataclass(frozen=True)
class SectionSummary:
    """One profiled target (or training cell) over every rank of a run."""

    key: str
    world_size: int
    rows: List[RankRow]
    shown: List[RankRow]
    hosts: List[HostRow]
    slowest: Optional[RankRow]
    median_busy_s: Optional[float]
    imbalance: Optional[float]
    excess_s: Optional[float]
    comm_share: Optional[float]
    most_waiting: Optional[RankRow]
    between_share: Optional[float]
    peak: Optional[RankRow]
    throughput: Optional[Throughput]
    step_s: Optional[float] = None
    comm_s: Optional[float] = None
    between_s: Optional[float] = None
    comm_ranks: List[int] = field(default_factory=list)
    wait_ranks: List[int] = field(default_factory=list)
    between_ranks: List[int] = field(default_factory=list)
    straggler_cost: Optional["StragglerCost"] = None
    empty: List[Tuple[int, int, Optional[int]]] = field(default_factory=list)  # (rank, steps taken, last index)
    schedule: Optional[str] = None
    load: Optional[float] = None
    comm_step_s: Optional[float] = None  # median step of the ranks with a communication figure
    between_step_s: Optional[float] = None  # median step of the ranks with a time between steps
    cpu_s: Optional[float] = None  # median over ranks of each one's median CPU seconds per step
    cpu_cost: Optional[float] = None  # median over ranks of each one's CPU cost (ranks with audio lengths)
    cpu_excess: Optional["CpuExcess"] = None  # the rank with the most CPU time per step, against the median rank
    crowding: Optional[HostLoad] = None  # the most crowded host over this section's steps
    data_wait_s: Optional[float] = None  # median over ranks of each one's median data wait (sbprof run)
    data_wait_step_s: Optional[float] = None  # median step of the ranks with a data wait
    data_wait_ranks: List[int] = field(default_factory=list)

    @property
    def data_wait_share(self) -> Optional[float]:
        """The data wait's share of the loop (see :func:`loop_s`), medians over ranks."""
        if self.data_wait_s is None or self.data_wait_step_s is None:
            return None
        loop = loop_s(self.data_wait_step_s, self.between_s, self.data_wait_s)
        return self.data_wait_s / loop if loop > 0 else None


def loop_s(step_s: float, between_s: Optional[float], data_wait_s: float) -> float:
    """One iteration of the loop: the step and the time between steps, which holds the data wait (where no time
    between steps is known, e.g. every step follows another stage's, the data wait stands for it).

    Example
    -------
    >>> round(loop_s(0.1, 0.02, 0.015), 6), round(loop_s(0.1, None, 0.015), 6)
    (0.12, 0.115)
    """
    return step_s + max(between_s or 0.0, data_wait_s)


@dataclass(frozen=True)
class CpuExcess:
    """The rank doing the most work by CPU time: its median CPU seconds per step less the median rank's (the lower
    middle one for an even count), which waiting for a core does not stretch."""

    rank: int
    seconds: float
    threads: int = 1


def cpu_excess(rows: List[RankRow]) -> Optional[CpuExcess]:
    """:class:`CpuExcess` over the ranks with CPU times (``None`` with fewer than two).

    Example
    -------
    >>> from sbprof.base.stats import summarise
    >>> def row(rank, cpu):
    ...     return RankRow(rank, "h", 0, rank, 3, None, None, None, None, None, None, None, None, None, "", "done",
    ...                    None, cpu=summarise(cpu))
    >>> e = cpu_excess([row(0, [0.010, 0.011, 0.012]), row(1, [0.051, 0.050, 0.052])])
    >>> e.rank, round(e.seconds, 4)
    (1, 0.04)
    """
    known = [r for r in rows if r.cpu is not None]
    if len(known) < 2:
        return None
    top = max(known, key=lambda r: r.cpu.median)
    return CpuExcess(top.rank, top.cpu.median - statistics.median_low([r.cpu.median for r in known]), top.threads)


def straggler_cost(totals: StepTotals, straggler: int, ranks: int, world_size: int) -> Optional["StragglerCost"]:
    """The step time saved if ``straggler`` ran at the median rank's pace (see :mod:`sbprof.analysis.distributed`).

    Per step every rank reported: its busy time minus the longest of the other ranks' (0 when it is not the
    longest); the median over those steps. ``None`` with fewer than two ranks.
    """
    if ranks < 2 or world_size < 2:
        return None
    costs = [max(0.0, top - nxt) if who == straggler else 0.0
             for i, (top, who, nxt) in sorted(totals.busy_top.items()) if totals.ranks.get(i) == ranks]
    if not costs:
        return None
    return StragglerCost(statistics.median(costs), len(costs))


@dataclass(frozen=True)
class StragglerCost:
    """What the slowest rank costs the job per step (median over the steps every rank reported)."""

    seconds: float
    steps: int


def shown_rows(rows: List[RankRow]) -> List[RankRow]:
    """Every rank up to :data:`SHOW_ALL_RANKS`; beyond, the slowest and the fastest by median busy time, by rank."""
    if len(rows) <= SHOW_ALL_RANKS:
        return rows
    by_busy = sorted(rows, key=lambda r: r.busy.median)
    return sorted(by_busy[:SHOWN_EACH_SIDE] + by_busy[-SHOWN_EACH_SIDE:], key=lambda r: r.rank)


def host_rows(rows: List[RankRow]) -> List[HostRow]:
    """The ranks grouped by (host, node rank)."""
    groups: Dict[Tuple[str, int], List[RankRow]] = {}
    for r in rows:
        groups.setdefault((r.host, r.node_rank), []).append(r)
    out = []
    for (host, node), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        shares = [r.comm_share for r in members if r.comm_share is not None]
        waits = [r.wait_s for r in members if r.wait_s is not None]
        peaks = [r.peak_bytes for r in members if r.peak_bytes is not None]
        out.append(HostRow(host, node, [r.rank for r in members],
                           statistics.median(r.busy.median for r in members), max(r.busy.median for r in members),
                           statistics.median(shares) if shares else None, max(waits) if waits else None,
                           max(peaks) if peaks else None))
    return out


def throughput(totals: StepTotals, ranks: int) -> Optional[Throughput]:
    """The world's utterances per second over the steps every rank reported (``None`` without utterance counts)."""
    steps = [i for i, n in totals.ranks.items() if n == ranks and i in totals.utterances]
    if not steps:
        return None
    seconds = sum(totals.max_wall[i] for i in steps)
    audio = sum(totals.audio_s[i] for i in steps) / seconds if all(i in totals.audio_s for i in steps) else None
    walls = sorted(totals.max_wall[i] for i in steps)
    spread = summarise(walls)
    return Throughput(len(steps), sum(totals.utterances[i] for i in steps) / seconds, audio,
                      statistics.median(walls), spread.q1, spread.q3)
