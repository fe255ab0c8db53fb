"""The ranks of one distributed run analysed together: stragglers, imbalance, communication, waiting.

Input: one record per (rank, section) (:class:`~sbprof.record.Measurement`,
``extra["rank"]`` holding each reported step's index, communication and
seconds since the previous step), fed in two passes so that a caller can
stream rank files with one rank in memory at a time:

1. :meth:`RunAnalysis.add_steps`: per section and step index, the smallest
   communication time over ranks, the longest step, and the utterances and
   audio seconds of every rank;
2. :meth:`RunAnalysis.add_rank`: one :class:`~sbprof.analysis.rank_rows.RankRow`
   per rank (a few numbers), against those per-step figures.

What the passes hold: :mod:`sbprof.analysis.rank_rows`; each section's summary
and figures: :mod:`sbprof.analysis.rank_sections`; the scaling over world
sizes: :mod:`sbprof.analysis.world_scaling`.

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
- CPU excess: the most CPU time per step of a rank (its median) less the
  median rank's, the own work that waiting for a core does not stretch;
  machine load, crowding and the verdicts that read them:
  :mod:`sbprof.analysis.rank_load` and :mod:`sbprof.analysis.rank_limits`;
- data wait (``sbprof run``): time in the DataLoader before a step; its share
  is of the loop (:func:`~sbprof.analysis.rank_sections.loop_s`);
- a share is always the ratio of the two medians printed beside it: a rank's
  communication share = its median communication / its median step time
  (wait alike); between steps = median between / (median step + median
  between); a section's share = the median over ranks of the numerator /
  the median over ranks of the step time. A figure from fewer ranks than the
  world names them;
- throughput: utterances (audio seconds) of every rank over the steps every
  rank reported, divided by the sum of those steps' longest time over ranks.;
- CPU time: the rank process's CPU seconds during a step (every thread:
  OpenMP workers, the backend's communication threads; a thread spinning
  while it waits counts); CPU cost: a rank's CPU seconds over the audio
  seconds of the same steps (core-seconds per second of audio, whatever the
  wait for a core), when the batches say their audio length (a Brain's
  ``PaddedBatch`` with ``sig``, ``sbprof train``).

Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.limits import Limits
from sbprof.analysis.rank_limits import section_limits
from sbprof.analysis.rank_load import HostAccumulator, most_crowded
from sbprof.analysis.rank_rows import MissingRank, RankRow, StepTotals
from sbprof.analysis.rank_sections import (SectionSummary, cpu_excess, host_rows, loop_s, shown_rows, straggler_cost,
                                           throughput)
from sbprof.record import Measurement
from sbprof.record.codec import Codec, from_json
from sbprof.record.payload import Payload
from sbprof.base.stats import Stats, summarise

NORMAL_ENDS = ("exit", "done")
"""How a rank that finished its work ends its file; any other end (SIGTERM, an exception) is an early stop."""


@dataclass(frozen=True)
class RankSteps(Codec):
    """``extra["rank"]`` of a rank record: its section, its reported steps' indices and per-step communication and
    time between steps (s), the last step it ended and how it ended."""

    section: Optional[str] = None
    steps: List[int] = field(default_factory=list)
    comm_s: Optional[List[Optional[float]]] = None
    gap_s: Optional[List[Optional[float]]] = None
    last_step: Optional[int] = None
    end: str = ""
    allocated_peak_bytes: Optional[List[Optional[float]]] = None  # per reported step, the allocator's peak


@dataclass(frozen=True)
class RankPayload(Payload):
    """What a rank record holds in ``extra`` (written by a rank, rebuilt by ``sbprof merge``, or by ``sbprof train``)."""

    rank: RankSteps = field(default_factory=RankSteps)
    utterances_per_step: Optional[List[float]] = None
    audio_s_per_step: Optional[List[float]] = None
    data_wait_s_per_step: Optional[List[float]] = None  # time in the DataLoader before each step (sbprof run)
    machine: Optional[Dict[str, float]] = None  # the machine's and the rank's CPU over the reported steps


@dataclass(frozen=True)
class WorldSettings(Codec):
    """A rank record's ``settings["distributed"]``: where the rank ran."""

    rank: Optional[int] = None
    host: Optional[str] = None
    node_rank: Optional[int] = None
    local_rank: Optional[int] = None


def rank_payload(m: Measurement) -> RankPayload:
    """The record's ``extra``, typed."""
    return from_json(RankPayload, m.extra, f"record {m.label!r}: extra")


def _per_step(m: Measurement, values: Optional[List[Optional[float]]]) -> List[Optional[float]]:
    return list(values) if values is not None and len(values) == len(m.wall_s) else [None] * len(m.wall_s)


def _peak(m: Measurement) -> Tuple[Optional[int], str]:
    mem = m.memory
    if mem is None:
        return None, ""
    if mem.peak_cuda_bytes is not None:
        return mem.peak_cuda_bytes, "CUDA allocator"
    return mem.peak_rss_bytes, "resident"


def _cpu(m: Measurement, extra: RankPayload) -> Tuple[Optional[Stats], Optional[float]]:
    """The rank's CPU seconds per step and its CPU cost (CPU seconds / audio seconds over the same steps); ``None``
    where the steps carry no CPU time (a rebuilt line without one reads 0) or no audio length."""
    if len(m.cpu_s) != len(m.wall_s) or not any(m.cpu_s):
        return None, None
    audio = extra.audio_s_per_step
    cost = (sum(m.cpu_s) / sum(audio) if audio is not None and len(audio) == len(m.cpu_s) and sum(audio) > 0
            else None)
    return summarise(m.cpu_s), cost


def _share(part: Optional[float], whole: float) -> Optional[float]:
    return None if part is None or whole <= 0 else part / whole


def _world(m: Measurement) -> WorldSettings:
    return from_json(WorldSettings, m.settings.get("distributed") or {}, f"record {m.label!r}: settings.distributed")


def section_of(m: Measurement, extra: Optional[RankPayload] = None) -> str:
    """The profiled target (and step name) a rank record belongs to: what is compared across ranks."""
    return str((extra or rank_payload(m)).rank.section or m.cell.model)


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
        extra = rank_payload(m)
        totals = self.totals.setdefault(section_of(m, extra), StepTotals())
        totals.schedule = totals.schedule or m.settings.get("schedule")
        load = m.settings.get("load_1min")
        if isinstance(load, (int, float)):
            totals.load = max(load, totals.load or 0.0)
        steps = extra.rank.steps or list(range(len(m.wall_s)))
        utterances, audio = extra.utterances_per_step, extra.audio_s_per_step
        for i, (index, wall, comm) in enumerate(zip(steps, m.wall_s, _per_step(m, extra.rank.comm_s))):
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
        extra = rank_payload(m)
        section = section_of(m, extra)
        totals = self.totals.setdefault(section, StepTotals())
        world = _world(m)
        rank = int(m.cell.rank if m.cell.rank is not None else world.rank or 0)
        host = (str(world.host if world.host is not None else ""), int(world.node_rank or 0))
        load = m.settings.get("load_1min")
        if not str(m.cell.device).startswith("cuda"):  # a GPU rank's step is the device's: cores do not crowd it
            totals.hosts.setdefault(host, HostAccumulator()).add(m.cell.threads, extra.machine,
                                                                 load if isinstance(load, (int, float)) else None,
                                                                 m.env.cpu_count if m.env is not None else None)
        if not m.wall_s:
            totals.empty.append((rank, int(m.warmup or 0), extra.rank.last_step))
            return None
        steps = extra.rank.steps or list(range(len(m.wall_s)))
        comm, between = _per_step(m, extra.rank.comm_s), _per_step(m, extra.rank.gap_s)
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
        cpu, cpu_cost = _cpu(m, extra)
        waits = extra.data_wait_s_per_step
        data_wait = statistics.median(waits) if waits and len(waits) == len(m.wall_s) else None
        row = RankRow(
            rank=rank, host=host[0], node_rank=host[1],
            local_rank=int(world.local_rank or 0), steps=len(m.wall_s), step=summarise(m.wall_s),
            busy=summarise(busy), comm_s=comm_median, comm_share=_share(comm_median, step_median),
            wait_s=wait_median, wait_share=_share(wait_median, step_median), between_s=between_median,
            between_share=_share(between_median, step_median + (between_median or 0.0)), peak_bytes=peak,
            peak_kind=kind, ended=extra.rank.end, last_step=extra.rank.last_step,
            wait_estimated=estimated and wait_median is not None, cpu=cpu, cpu_cost=cpu_cost, data_wait_s=data_wait,
            data_wait_share=None if data_wait is None else _share(data_wait, loop_s(step_median, between_median,
                                                                                   data_wait)),
            threads=max(1, int(m.cell.threads or 1)))
        self.rows.setdefault(section, []).append(row)
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
        cpu = [r.cpu.median for r in rows if r.cpu is not None]
        costs = [r.cpu_cost for r in rows if r.cpu_cost is not None]
        waiting_data = [r for r in rows if r.data_wait_s is not None]
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
            empty=sorted(totals.empty), schedule=totals.schedule, load=totals.load, comm_step_s=comm_step,
            between_step_s=between_step, cpu_s=statistics.median(cpu) if cpu else None,
            cpu_cost=statistics.median(costs) if costs else None, cpu_excess=cpu_excess(rows),
            crowding=most_crowded([acc.result(h, n) for (h, n), acc in sorted(totals.hosts.items())]),
            data_wait_s=statistics.median(r.data_wait_s for r in waiting_data) if waiting_data else None,
            data_wait_step_s=statistics.median(r.step.median for r in waiting_data) if waiting_data else None,
            data_wait_ranks=[r.rank for r in waiting_data])


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
    limits: Limits = field(default_factory=Limits)

    @property
    def complete(self) -> bool:
        """Every rank present and ended normally."""
        return not self.missing and not self.stopped_early

    @property
    def hosts(self) -> int:
        """How many (host, node group) pairs ran a rank with figures."""
        return len({(h.host, h.node_rank) for s in self.sections for h in s.hosts})


def summarise_run(analysis: RunAnalysis, run_id: str, backend: str, source: str, notes: Sequence[str] = (),
                  gpu: Optional[Dict[str, List[Dict[str, Any]]]] = None) -> RunSummary:
    """The run's summary; a rank whose end is not one of :data:`NORMAL_ENDS` (e.g. SIGTERM) stopped early."""
    sections = analysis.sections()
    early = {r.rank: r for s in sections for r in s.rows if r.ended not in NORMAL_ENDS}
    return RunSummary(run_id, analysis.world_size, backend, source, sections,
                      sorted(analysis.missing, key=lambda m: m.rank), sorted(early.values(), key=lambda r: r.rank),
                      list(notes), gpu, section_limits(sections))
