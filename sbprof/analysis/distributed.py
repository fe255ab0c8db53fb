"""The ranks of one distributed run analysed together: stragglers, imbalance, communication, waiting, scaling.

Input: one record per (rank, section) (:class:`~sbprof.record.Measurement`,
``extra["rank"]`` holding each reported step's index, communication and
seconds since the previous step), fed in two passes so that a caller can
stream rank files with one rank in memory at a time:

1. :meth:`RunAnalysis.add_steps`: per section and step index, the smallest
   communication time over ranks, the longest step, and the utterances and
   audio seconds of every rank;
2. :meth:`RunAnalysis.add_rank`: one :class:`RankRow` per rank (a few
   numbers), against those per-step figures.

Definitions (the report states them beside each table):

- step time: wall-clock time of one profiled step on a rank;
- wait: a step's communication time on a rank minus the smallest over ranks
  for that step (the fastest rank's is the collective itself; the rest is
  time spent waiting for the others); at a step where some rank has no
  communication figure (it died before its recording was read), the rank's
  own fastest collective stands for the collective, and the wait is marked
  estimated;
- busy: step time minus wait (the rank's own work); the slowest rank has the
  longest median busy time; imbalance = its median busy time / the median
  rank's (with an even count, the lower middle rank: with two ranks, the
  other one);
- straggler cost: what the slowest rank costs the job, the step time saved
  if it ran at the median rank's pace: per step every rank reported, its
  busy time minus the longest busy time of the other ranks (never below 0),
  median over those steps. With two ranks it is the difference of the two
  ranks' busy times step by step;
- a share is always the ratio of the two medians printed beside it: a rank's
  communication share = its median communication / its median step time
  (wait alike); between steps = median between / (median step + median
  between); a section's share = the median over ranks of the numerator /
  the median over ranks of the step time. A figure from fewer ranks than the
  world names them;
- throughput: utterances (audio seconds) of every rank over the steps every
  rank reported, divided by the sum of those steps' longest time over ranks.

Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.record import Measurement
from sbprof.stats import Stats, summarise

NORMAL_ENDS = ("exit", "done")
"""How a rank that finished its work ends its file; any other end (SIGTERM, an exception) is an early stop."""
SHOW_ALL_RANKS = 32
"""Up to this many ranks the report lists every one; beyond, the slowest and fastest (every rank in the CSV)."""
SHOWN_EACH_SIDE = 8


@dataclass
class StepTotals:
    """Per step index of one section, over the ranks fed so far (pass 1)."""

    min_comm: Dict[int, float] = field(default_factory=dict)
    comm_ranks: Dict[int, int] = field(default_factory=dict)  # ranks with a communication figure per step
    busy_top: Dict[int, Tuple[float, int, float]] = field(default_factory=dict)  # pass 2: (longest, its rank, next)
    empty: List[Tuple[int, int, Optional[int]]] = field(default_factory=list)  # ranks with 0 reported steps
    schedule: Optional[str] = None
    load: Optional[float] = None  # the highest 1-minute load average a rank saw when it wrote its records
    max_wall: Dict[int, float] = field(default_factory=dict)
    ranks: Dict[int, int] = field(default_factory=dict)
    utterances: Dict[int, float] = field(default_factory=dict)
    audio_s: Dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RankRow:
    """One rank's figures in one section (see the module docstring for each definition)."""

    rank: int
    host: str
    node_rank: int
    local_rank: int
    steps: int
    step: Stats
    busy: Stats
    comm_s: Optional[float]
    comm_share: Optional[float]
    wait_s: Optional[float]
    wait_share: Optional[float]
    between_s: Optional[float]
    between_share: Optional[float]
    peak_bytes: Optional[int]
    peak_kind: str
    ended: str
    last_step: Optional[int]
    wait_estimated: bool = False  # some steps lacked another rank's communication (see add_rank)


@dataclass(frozen=True)
class MissingRank:
    """A rank without figures: it never wrote (``last_step`` ``None``), or it died or hung after that step."""

    rank: int
    last_step: Optional[int]
    why: str
    host: str = ""
    node_rank: Optional[int] = None


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
    """Utterances and audio seconds trained per second by the whole world (see the module docstring)."""

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


def _rank_extra(m: Measurement) -> Dict[str, Any]:
    return m.extra.get("rank") or {}


def _per_step(m: Measurement, name: str) -> List[Optional[float]]:
    values = _rank_extra(m).get(name)
    return list(values) if values is not None and len(values) == len(m.wall_s) else [None] * len(m.wall_s)


def _peak(m: Measurement) -> Tuple[Optional[int], str]:
    mem = m.memory
    if mem is None:
        return None, ""
    if mem.peak_cuda_bytes is not None:
        return mem.peak_cuda_bytes, "CUDA allocator"
    return mem.peak_rss_bytes, "resident"


def _sum(values: Sequence[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _share(part: Optional[float], whole: float) -> Optional[float]:
    return None if part is None or whole <= 0 else part / whole


def _world(m: Measurement) -> Dict[str, Any]:
    return m.settings.get("distributed") or {}


def section_of(m: Measurement) -> str:
    """The profiled target (and step name) a rank record belongs to: what is compared across ranks."""
    return str(_rank_extra(m).get("section") or m.cell.model)


class RunAnalysis:
    """The two passes over one run's rank records (see the module docstring).

    Example
    -------
    >>> from sbprof.record import Cell
    >>> def rec(rank, walls, comms):
    ...     return Measurement(label="r", cell=Cell(model="step", rank=rank), wall_s=walls, cpu_s=walls,
    ...                        extra={"rank": {"steps": [0, 1], "comm_s": comms}})
    >>> a, b = rec(0, [1.0, 1.0], [0.5, 0.5]), rec(1, [1.0, 1.0], [0.1, 0.1])
    >>> run = RunAnalysis(world_size=2)
    >>> run.add_steps(a); run.add_steps(b)
    >>> rows = [run.add_rank(a), run.add_rank(b)]
    >>> s = run.sections()[0]
    >>> s.slowest.rank, round(s.imbalance, 3), round(s.most_waiting.wait_s, 3)
    (1, 1.667, 0.4)
    """

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.totals: Dict[str, StepTotals] = {}
        self.rows: Dict[str, List[RankRow]] = {}
        self.missing: List[MissingRank] = []

    def add_steps(self, m: Measurement) -> None:
        """Pass 1: one rank's record of one section."""
        totals = self.totals.setdefault(section_of(m), StepTotals())
        totals.schedule = totals.schedule or m.settings.get("schedule")
        load = m.settings.get("load_1min")
        if isinstance(load, (int, float)):
            totals.load = max(load, totals.load or 0.0)
        steps = _rank_extra(m).get("steps") or list(range(len(m.wall_s)))
        utterances, audio = m.extra.get("utterances_per_step"), m.extra.get("audio_s_per_step")
        for i, (index, wall, comm) in enumerate(zip(steps, m.wall_s, _per_step(m, "comm_s"))):
            if comm is not None:
                totals.min_comm[index] = min(comm, totals.min_comm.get(index, comm))
                totals.comm_ranks[index] = totals.comm_ranks.get(index, 0) + 1
            totals.max_wall[index] = max(wall, totals.max_wall.get(index, wall))
            totals.ranks[index] = totals.ranks.get(index, 0) + 1
            if utterances is not None and i < len(utterances):
                totals.utterances[index] = totals.utterances.get(index, 0.0) + utterances[i]
            if audio is not None and i < len(audio):
                totals.audio_s[index] = totals.audio_s.get(index, 0.0) + audio[i]

    def add_rank(self, m: Measurement) -> Optional[RankRow]:
        """Pass 2: one rank's row of one section (every rank of the section fed to pass 1 first).

        A record with no reported step gives no row: the section says how many steps that rank took.
        """
        totals = self.totals.setdefault(section_of(m), StepTotals())
        world = _world(m)
        rank = int(m.cell.rank if m.cell.rank is not None else world.get("rank", 0))
        if not m.wall_s:
            totals.empty.append((rank, int(m.warmup or 0), _rank_extra(m).get("last_step")))
            return None
        steps = _rank_extra(m).get("steps") or list(range(len(m.wall_s)))
        comm, between = _per_step(m, "comm_s"), _per_step(m, "gap_s")
        # A step without every rank's communication (a rank died before its recording was read): the rank's own
        # fastest collective stands for the collective itself (the row says its wait is estimated so).
        own_min = min((c for c in comm if c is not None), default=None)
        estimated = any(c is not None and totals.comm_ranks.get(i, 0) < self.world_size for i, c in zip(steps, comm))
        wait = [None if c is None or self.world_size < 2 else max(0.0, c - (
            totals.min_comm[i] if totals.comm_ranks.get(i, 0) >= self.world_size else min(totals.min_comm[i], own_min)))
            for i, c in zip(steps, comm)]
        busy = [w - (x or 0.0) for w, x in zip(m.wall_s, wait)]
        for index, b in zip(steps, busy):
            top = totals.busy_top.get(index)
            if top is None:
                totals.busy_top[index] = (b, rank, -1.0)
            elif b > top[0]:
                totals.busy_top[index] = (b, rank, top[0])
            else:
                totals.busy_top[index] = (top[0], top[1], max(top[2], b))
        step_median = statistics.median(m.wall_s)
        known_wait = [x for x in wait if x is not None]
        known_between = [g for g in between if g is not None]
        comm_known = [c for c in comm if c is not None] if self.world_size > 1 else []  # one rank: no peer
        comm_median = statistics.median(comm_known) if comm_known else None
        wait_median = statistics.median(known_wait) if known_wait else None
        between_median = statistics.median(known_between) if known_between else None
        peak, kind = _peak(m)
        row = RankRow(
            rank=rank, host=str(world.get("host", "")), node_rank=int(world.get("node_rank") or 0),
            local_rank=int(world.get("local_rank") or 0), steps=len(m.wall_s), step=summarise(m.wall_s),
            busy=summarise(busy), comm_s=comm_median, comm_share=_share(comm_median, step_median),
            wait_s=wait_median, wait_share=_share(wait_median, step_median), between_s=between_median,
            between_share=_share(between_median, step_median + (between_median or 0.0)), peak_bytes=peak,
            peak_kind=kind, ended=str(_rank_extra(m).get("end", "")), last_step=_rank_extra(m).get("last_step"),
            wait_estimated=estimated and wait_median is not None)
        self.rows.setdefault(section_of(m), []).append(row)
        return row

    def add_missing(self, missing: MissingRank) -> None:
        self.missing.append(missing)

    def sections(self) -> List[SectionSummary]:
        """Every section's summary, in the order sections were first fed."""
        return [self._section(key, sorted(self.rows.get(key, []), key=lambda r: r.rank)) for key in self.totals]

    def _section(self, key: str, rows: List[RankRow]) -> SectionSummary:
        totals = self.totals[key]
        if not rows:
            return SectionSummary(key, self.world_size, [], [], [], None, None, None, None, None, None, None, None,
                                  None, empty=sorted(totals.empty), schedule=totals.schedule)
        slowest = max(rows, key=lambda r: r.busy.median)
        median_busy = statistics.median_low([r.busy.median for r in rows])
        step_s = statistics.median(r.step.median for r in rows)
        waiting = [r for r in rows if r.wait_s is not None]
        comm = [r for r in rows if r.comm_s is not None]
        between = [r for r in rows if r.between_s is not None]
        peaks = [r for r in rows if r.peak_bytes is not None]
        comm_s = statistics.median(r.comm_s for r in comm) if comm else None
        comm_step = statistics.median(r.step.median for r in comm) if comm else None
        between_s = statistics.median(r.between_s for r in between) if between else None
        between_step = statistics.median(r.step.median for r in between) if between else None
        return SectionSummary(
            key=key, world_size=self.world_size, rows=rows, shown=shown_rows(rows), hosts=host_rows(rows),
            slowest=slowest, median_busy_s=median_busy,
            imbalance=slowest.busy.median / median_busy if median_busy > 0 and len(rows) > 1 else None,
            excess_s=slowest.busy.median - median_busy if len(rows) > 1 else None,
            comm_share=None if comm_s is None else _share(comm_s, comm_step or 0.0),
            most_waiting=max(waiting, key=lambda r: r.wait_s) if waiting else None,
            between_share=None if between_s is None else _share(between_s, (between_step or 0.0) + between_s),
            peak=max(peaks, key=lambda r: r.peak_bytes) if peaks else None,
            throughput=throughput(totals, len(rows)), step_s=step_s, comm_s=comm_s, between_s=between_s,
            comm_ranks=[r.rank for r in comm], wait_ranks=[r.rank for r in waiting],
            between_ranks=[r.rank for r in between], straggler_cost=straggler_cost(totals, slowest.rank, len(rows),
                                                                                  self.world_size),
            empty=sorted(totals.empty), schedule=totals.schedule, load=totals.load)


def straggler_cost(totals: StepTotals, straggler: int, ranks: int, world_size: int) -> Optional["StragglerCost"]:
    """The step time saved if ``straggler`` ran at the median rank's pace (see the module docstring).

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


@dataclass(frozen=True)
class RunSummary:
    """Everything a merged report of one run shows (see the module docstring)."""

    run_id: str
    world_size: int
    backend: str
    source: str
    sections: List[SectionSummary]
    missing: List[MissingRank]
    stopped_early: List[RankRow]
    notes: List[str] = field(default_factory=list)
    gpu: Optional[Dict[str, List[Dict[str, Any]]]] = None

    @property
    def complete(self) -> bool:
        """Every rank present and ended normally."""
        return not self.missing and not self.stopped_early


def summarise_run(analysis: RunAnalysis, run_id: str, backend: str, source: str, notes: Sequence[str] = (),
                  gpu: Optional[Dict[str, List[Dict[str, Any]]]] = None) -> RunSummary:
    """The run's summary; a rank whose end is not one of :data:`NORMAL_ENDS` (e.g. SIGTERM) stopped early."""
    sections = analysis.sections()
    early = {r.rank: r for s in sections for r in s.rows if r.ended not in NORMAL_ENDS}
    return RunSummary(run_id, analysis.world_size, backend, source, sections,
                      sorted(analysis.missing, key=lambda m: m.rank), sorted(early.values(), key=lambda r: r.rank),
                      list(notes), gpu)


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
