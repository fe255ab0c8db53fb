"""A transducer benchmark's results analysed once: per batching mode and setting, the backends ranked.

On a CPU device each backend's CPU time per step (the process's, all its
threads) stands beside its wall time: the job benchmarks a loss on shapes,
with no seconds of audio, so the CPU cost is per step, not per second of
audio. A backend is *ranked* only when it was measured and agreed with the
reference; the others follow with the reason. A cell measured in several
runs pools its runs' steps (the step-time statistics) and takes the median
of their peaks. The renderers (:mod:`sbprof.report.transducer`) format the
:class:`TransducerSummary`. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.figures import Outcome
from sbprof.analysis.limits import Limits, Verdict, fastest_backend, limits, out_of_memory
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement
from sbprof.record.cell import Cell
from sbprof.record.codec import Codec, from_json
from sbprof.record.payload import Payload
from sbprof.record.results import Results
from sbprof.analysis.runs import group_runs, representative
from sbprof.base.stats import Stats, summarise

MB = 1e6


@dataclass(frozen=True)
class Agreement(Codec):
    """A backend's check against the reference (``extra["agreement"]``)."""

    ok: bool = False
    message: str = ""
    max_loss_rel_diff: Optional[float] = None
    max_grad_abs_diff: Optional[float] = None
    tolerances: Dict[str, float] = field(default_factory=dict)  # the loss and gradient tolerances checked against
    cases: int = 0  # the cases checked


@dataclass(frozen=True)
class Padding(Codec):
    """The measured steps' batches and their padding (``extra["padding"]``)."""

    batches: int
    utterances: int
    frame_padding: float
    lattice_padding: float
    frames: int = 0  # the utterances' frames, unpadded
    padded_frames: int = 0
    lattice_cells: int = 0  # the frames x tokens cells of the utterances' lattices, unpadded
    padded_lattice_cells: int = 0


@dataclass(frozen=True)
class SearchPayload(Codec):
    """A memory search's outcome (``extra["search"]``): every probe ``(value, peak bytes or None, fits)``."""

    largest: Optional[int] = None
    probes: List[Tuple[int, Optional[float], bool]] = field(default_factory=list)
    capped: bool = False
    budget_bytes: Optional[float] = None  # the memory budget searched against


@dataclass(frozen=True)
class TransducerPayload(Payload):
    """What a transducer worker (or the plan, for a backend not installed) saves in a record's ``extra``."""

    agreement: Optional[Agreement] = None
    padding: Optional[Padding] = None
    search: Optional[SearchPayload] = None
    loadavg_1m: Optional[float] = None
    not_installed: bool = False
    install_hint: str = ""
    executable: Optional[str] = None  # the worker's Python interpreter (a backend may need its own)
    worker_threads: Optional[int] = None  # torch's threads in the worker
    step_shapes: Optional[List[List[int]]] = None  # per measured step: utterances, longest frames, longest tokens
    trace: Optional[str] = None  # the trace file, relative to the output folder


def payload(m: Measurement) -> TransducerPayload:
    """The record's ``extra``, typed."""
    return from_json(TransducerPayload, m.extra, f"record {m.label!r}: extra")


@dataclass(frozen=True)
class BackendRow:
    """One backend's cell: the label, status and message, cell and payload of the record that speaks for it, its
    step times (pooled over runs), its peak, and on a CPU device its CPU time per step (mean and ~95 % interval,
    pooled over runs)."""

    label: str
    outcome: Outcome
    cell: Cell
    payload: TransducerPayload
    python: Optional[str]  # the interpreter and torch the backend ran in
    torch: Optional[str]
    runs: int
    ranked: bool
    steps: Optional[Stats]
    peak_mb: Optional[float]
    cpu_step_s: Optional[Tuple[float, float, float]] = None

    @property
    def mode(self) -> str:
        """``fixed``, ``max_frames`` or ``search``."""
        return mode_of(self.cell)

    @property
    def max_frames(self) -> Optional[int]:
        """The frames a batch holds at most (``max_frames`` mode)."""
        return self.cell.params.get("max_frames")


@dataclass(frozen=True)
class ModeTable:
    """The backends of one batching mode, size and setting: ranked ones by mean step time, then the others."""

    mode: str
    size: Optional[int]
    device: str
    threads: int
    rows: List[BackendRow]
    padding: Optional[Padding]


@dataclass(frozen=True)
class SearchRow:
    """A memory search's row: its backend (the record's label), status and message, device, what it searched, its
    budget (MB, ``None``: the device's OOM) and every probe's peak (MB)."""

    label: str
    outcome: Outcome
    device: str
    searched: Optional[str]
    payload: SearchPayload
    budget_mb: Optional[float]
    probes_mb: List[Tuple[int, Optional[float]]]


@dataclass(frozen=True)
class Shapes(Codec):
    """The rules' ``shapes``: where the utterance shapes come from and their scale-down."""

    source: Optional[str] = None
    scale: Optional[float] = None


@dataclass(frozen=True)
class TransducerRules(Codec):
    """A transducer benchmark's rules, as its report's header names them."""

    vocab_size: Optional[int] = None
    joiner_dim: Optional[int] = None
    shapes: Optional[Shapes] = None
    warmup: Optional[int] = None
    measured: Optional[int] = None


@dataclass(frozen=True)
class TransducerSummary:
    """Everything a transducer benchmark's reports show (see the module docstring); ``rules``: ``None`` when the
    file holds none."""

    rules: Optional[TransducerRules]
    loads: Optional[Tuple[float, float, List[str]]]
    tables: List[ModeTable]
    searches: List[SearchRow]
    rows: List[BackendRow]
    limits: Limits = field(default_factory=Limits)  # what limits this here: see transducer_limits


def mode_of(cell: Cell) -> str:
    return str(cell.params.get("mode", ""))


def _peak_mb(m: Measurement) -> Optional[float]:
    if m.memory is None:
        return None
    added = m.memory.peak_cuda_delta_bytes if m.cell.device.startswith("cuda") else m.memory.peak_rss_delta_bytes
    return None if added is None else added / MB


def _row(runs: Sequence[Measurement]) -> BackendRow:
    ok = [m for m in runs if m.ok and m.wall_s]
    rep = representative(runs)
    peaks = [p for p in (_peak_mb(m) for m in ok) if p is not None]
    extra = payload(rep)
    cpu = [c for m in ok for c in m.cpu_s] if rep.cell.device == "cpu" else []
    return BackendRow(label=rep.label, outcome=Outcome.of(rep), cell=rep.cell, payload=extra,
                      python=rep.settings.get("python"), torch=rep.settings.get("torch"), runs=len(ok),
                      ranked=bool(ok) and extra.agreement is not None and extra.agreement.ok,
                      steps=summarise([s for m in ok for s in m.wall_s]) if ok else None,
                      peak_mb=statistics.median(peaks) if peaks else None,
                      cpu_step_s=mean_interval(summarise(cpu)) if cpu else None)


def analyse(results: Results) -> TransducerSummary:
    """The one analysis of a transducer benchmark's results (see the module docstring).

    A measured backend record without step times (a hand-edited file) is refused, naming it.
    """
    for m in results.records:
        if m.ok and not m.wall_s and mode_of(m.cell) != "search":
            raise ConfigError(f"record {m.label!r}: measured (status ok) but its field 'wall_s' holds no step times")
    rows = [_row(runs) for runs in group_runs(results.records).values()]
    tables: Dict[Tuple[str, Optional[int], str, int], List[BackendRow]] = {}
    for row in rows:
        if row.mode == "search":
            continue
        size = row.cell.batch_size if row.mode == "fixed" else row.max_frames
        tables.setdefault((row.mode, size, row.cell.device, row.cell.threads), []).append(row)
    timed = [(m, load) for m in results.records for load in [payload(m).loadavg_1m] if load is not None]
    loads = None
    if timed:
        values = [load for _, load in timed]
        # The load counts the measuring worker's own threads: only beyond them did others compete.
        busy = list(dict.fromkeys(m.label for m, load in timed if load > m.cell.threads))
        loads = (min(values), max(values), busy)
    mode_tables = [ModeTable(mode, size, device, threads,
                             sorted((r for r in group if r.ranked), key=lambda r: r.steps.mean)
                             + [r for r in group if not r.ranked],
                             next((r.payload.padding for r in group if r.payload.padding), None))
                   for (mode, size, device, threads), group in tables.items()]
    return TransducerSummary(
        rules=from_json(TransducerRules, dict(results.rules), "rules") if results.rules else None, loads=loads,
        tables=mode_tables, searches=[_search_row(r) for r in rows if r.mode == "search"], rows=rows,
        limits=transducer_limits(mode_tables))


def _search_row(row: BackendRow) -> SearchRow:
    found = row.payload.search or SearchPayload()
    budget = row.cell.params.get("budget_bytes")
    return SearchRow(label=row.label, outcome=row.outcome, device=row.cell.device,
                     searched=row.cell.params.get("searched"), payload=found,
                     budget_mb=None if budget is None else budget / MB,
                     probes_mb=[(v, None if p is None else p / MB) for v, p, _ in found.probes])


# -- what limits this (issue 33) -----------------------------------------------------------------------------------

Z95 = 1.96
"""A mean step's ~95 % interval: mean +- Z95 x standard error (normal approximation over the measured steps)."""


def mean_interval(steps: Stats) -> Tuple[float, float, float]:
    """A mean step time and its ~95 % interval.

    Example
    -------
    >>> from sbprof.base.stats import summarise
    >>> [round(x, 3) for x in mean_interval(summarise([1.0, 2.0, 3.0]))]
    [2.0, 0.868, 3.132]
    """
    half = Z95 * steps.stdev / steps.count ** 0.5
    return steps.mean, steps.mean - half, steps.mean + half


def _where(table: ModeTable) -> str:
    size = f"batch size {table.size}" if table.mode == "fixed" else f"max frames {table.size}"
    return f"{size}, {table.device}, {table.threads} thread(s)"


def transducer_limits(tables: Sequence[ModeTable]) -> Limits:
    """Per table, the fastest backend that agrees with the reference (a backend that disagrees is never named
    fastest; one that ran faster is named beside it), and the backend that runs out of memory at the smallest
    size, with the backends that fit there."""
    candidates: List[Optional[Verdict]] = []
    undecided: List[str] = []
    for table in tables:
        ranked = [r for r in table.rows if r.ranked]
        if not ranked:
            undecided.append(f"fastest backend at {_where(table)}: no backend passed the correctness check")
            continue
        best = mean_interval(ranked[0].steps)
        wrong = [r.label for r in table.rows if not r.ranked and r.steps is not None and r.steps.mean < best[0]]
        runner_up = (ranked[1].label, mean_interval(ranked[1].steps)) if len(ranked) > 1 else None
        verdict = fastest_backend(ranked[0].label, best, _where(table), runner_up, wrong)
        if verdict is None:
            undecided.append(f"fastest backend at {_where(table)}: {ranked[0].label} and "
                             f"{ranked[1].label}'s step-time intervals overlap")
        candidates.append(verdict)
    ooms = [(t.size or 0, t, r) for t in tables for r in t.rows if r.outcome.status == "oom"]
    if ooms:
        _, table, row = min(ooms, key=lambda x: x[0])
        candidates.append(out_of_memory(row.label, _where(table),
                                        [r.label for r in table.rows if r.steps is not None]))
    return limits(candidates, undecided)
