"""What the two passes over a distributed run's rank records hold: per-step totals over ranks, one row per rank
in a section, and the ranks without figures (definitions: :mod:`sbprof.analysis.distributed`).

Pure: no torch, no clocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from sbprof.analysis.rank_load import HostAccumulator
from sbprof.base.stats import Stats


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
    hosts: Dict[Tuple[str, int], HostAccumulator] = field(default_factory=dict)  # pass 2: each host's load


@dataclass(frozen=True)
class RankRow:
    """One rank's figures in one section (see :mod:`sbprof.analysis.distributed` for each definition)."""

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
    cpu: Optional[Stats] = None  # the rank process's CPU seconds per step (every thread)
    cpu_cost: Optional[float] = None  # its CPU seconds over the audio seconds of the same steps
    data_wait_s: Optional[float] = None  # median time in the DataLoader before a step (sbprof run)
    data_wait_share: Optional[float] = None  # of the loop: step + time between steps (or + data wait)
    threads: int = 1  # the rank's torch threads


@dataclass(frozen=True)
class MissingRank:
    """A rank without figures: it never wrote (``last_step`` ``None``), or it died or hung after that step."""

    rank: int
    last_step: Optional[int]
    why: str
    host: str = ""
    node_rank: Optional[int] = None

