"""The summary of a stream job that the renderers format: per setting its latency rows, its capacity searches
(with their probes) and its offline RTFx.

Frozen dataclasses, built once by :func:`sbprof.analysis.stream.analyse`; the definitions of their figures are
in :mod:`sbprof.analysis.stream`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from sbprof.analysis.figures import Outcome
from sbprof.analysis.limits import Limits
from sbprof.analysis.machine_facts import MachineFacts
from sbprof.analysis.stream_criterion import BEHIND_SLOPE
from sbprof.record.cell import Cell, setting_name
from sbprof.record.codec import Codec


@dataclass(frozen=True)
class LatencyRow:
    """One latency cell of one setting (runs pooled): the figures of the report's tables, in ms, kB and MB;
    ``outcome``: the status and message of the record that speaks for it."""

    outcome: Outcome
    chunk_size: int
    left_context: int
    streams: int
    runs: int
    traffic: str = "aligned"
    chunk_ms: Optional[float] = None
    chunks: int = 0
    compute_ms: Dict[str, float] = field(default_factory=dict)
    p99_interval_ms: Optional[Tuple[float, float, bool]] = None
    margin: Optional[float] = None
    algorithmic_ms: Optional[float] = None
    felt_ms: Optional[float] = None  # algorithmic latency + p99 steady delay: what a user waits
    delay_ms: Dict[str, float] = field(default_factory=dict)
    end_delay_ms: Dict[str, float] = field(default_factory=dict)
    delay_growth: Optional[float] = None
    behind: bool = False
    first_token_ms: Optional[float] = None
    final_ms: Optional[float] = None
    tokens_per_chunk: Optional[float] = None
    tokens_per_audio_s: Optional[float] = None
    growth: Optional[float] = None
    streaming_rtf: Optional[float] = None
    cpu_cost: Optional[Tuple[float, float, float]] = None  # core-s per s of audio: median, ~95 % interval
    utilisation: Optional[float] = None
    state_kb: Optional[float] = None
    state_view_kb: Optional[float] = None
    process_peak_mb: Optional[float] = None
    memory_bytes: Optional[float] = None  # what the cell's passes added to the memory in use before them
    emission_ms: Dict[str, float] = field(default_factory=dict)
    emission_tokens: int = 0
    unserved: int = 0
    compute_sorted_ms: List[float] = field(default_factory=list)
    delay_sorted_ms: List[float] = field(default_factory=list)


@dataclass(frozen=True)
class Probe:
    """One capacity probe: ``streams`` served at once; its p99 compute and delay (ms), delay growth (s/s),
    utilisation, largest memory reading (bytes), whether it passed, the chunks left unserved, its p50 compute and
    a ~95 % order-statistics interval of its p99 delay (ms)."""

    streams: int
    p99_ms: float
    delay_p99_ms: Optional[float]
    slope: Optional[float]
    utilisation: Optional[float]
    memory_bytes: Optional[float]
    passed: bool
    unserved: int = 0
    compute_p50_ms: Optional[float] = None
    delay_p99_interval_ms: Optional[Tuple[float, float]] = None
    waited_share: Optional[float] = None  # the serving thread's wait for a core over the probe's length

    @property
    def behind(self) -> bool:
        return self.unserved > 0 or (self.slope is not None and self.slope > BEHIND_SLOPE)


@dataclass(frozen=True)
class CapacityRow:
    """A capacity search: the streams per machine within the delay target (median over runs; ``found``: each
    run's) with the range repeated probes gave (``capacity_low``, ``capacity_high``), the probes of its first run,
    the worst-case compute budget with its interval (from the p99 compute at the capacity), state per stream
    (held, and addressed by the context's tensors), memory per added stream (MB: slope, low, high; or
    ``marginal_why`` it is not given), the server's own time between calls (µs, median) and the serving thread's
    wait for a core at the capacity (a share of the probe); ``outcome`` and ``cell``: the status and message, and
    the cell, of the record that speaks for it."""

    outcome: Outcome
    cell: Cell
    chunk_size: int
    left_context: int
    chunk_ms: Optional[float]
    target_ms: Optional[float]
    capacity: Optional[float]
    runs: int
    max_streams: int
    traffic: str = "spread"
    probes: List[Probe] = field(default_factory=list)
    budget: Optional[int] = None
    delay_p99_ms: Optional[float] = None
    state_kb: Optional[float] = None
    marginal_mb: Optional[Tuple[float, float, float]] = None
    lone_ratio: Optional[float] = None
    found: List[int] = field(default_factory=list)
    capacity_low: Optional[int] = None
    capacity_high: Optional[int] = None
    budget_low: Optional[int] = None
    budget_high: Optional[int] = None
    p99_compute_ms: Optional[float] = None
    state_view_kb: Optional[float] = None
    marginal_why: Optional[str] = None
    own_us: Optional[float] = None
    waited_share: Optional[float] = None


@dataclass(frozen=True)
class StreamSetting:
    """One (device, threads): its latency cells, capacity searches, offline call (its record's status and message),
    offline RTFx (median, range) and machine load; per chunk size and left context, the memory per added stream
    over its cells' stream counts (MB: slope, low, high), or why not."""

    device: str
    threads: int
    rows: List[LatencyRow]
    capacities: List[CapacityRow]
    offline: Optional[Outcome]
    offline_rtfx: Optional[float]
    loads: Optional[Tuple[float, float]]
    offline_range: Optional[Tuple[float, float]] = None
    marginal_mb: Dict[Tuple[int, int], Tuple[float, float, float]] = field(default_factory=dict)
    marginal_why: Dict[Tuple[int, int], str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Filesystem-safe, e.g. ``cpu-1threads`` (the plots' file names)."""
        return setting_name(self.device, self.threads)

    @property
    def capacity(self) -> Optional[CapacityRow]:
        return self.capacities[0] if self.capacities else None


@dataclass(frozen=True)
class StreamRules(Codec):
    """A stream job's rules, as its report's header names them."""

    utterance_s: Optional[float] = None
    input: Optional[str] = ""
    traffic: Optional[str] = "aligned"
    warmup: Optional[int] = None
    measured: Optional[int] = None


@dataclass(frozen=True)
class StreamSummary:
    """Everything a stream job's reports show (see :mod:`sbprof.analysis.stream`)."""

    model: str
    rules: StreamRules
    machine: MachineFacts
    settings: List[StreamSetting]
    loads: Optional[Tuple[float, float]] = None  # the lowest and highest 1-minute load over every setting
    limits: Limits = field(default_factory=Limits)  # what limits this model here (sbprof.analysis.stream_limits)
