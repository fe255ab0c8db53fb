"""A training profile's results analysed once: per cell, its figures, its breakdown's step statistics, FLOPs shares.

What a train worker saves in a record's ``extra`` is read as a :class:`TrainPayload` (``results.json`` keeps
its shape).

:func:`train_figures` derives one record's figures (step times,
throughput, compute), written beside it in ``results.json`` and read by
:func:`analyse`, which gathers what the report shows into a
:class:`TrainSummary`; the renderer (:mod:`sbprof.report.train`)
only formats it. Records of a ``world_sizes`` study (cells with a
``world_size`` coordinate) are grouped by launched world and merged like a
distributed run's rank files (:mod:`sbprof.analysis.distributed`), then set
side by side over world sizes in scaling tables. Pure: no torch, no clocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from sbprof.analysis.breakdown import ModuleBreakdown, BreakdownSteps, breakdown_steps
from sbprof.analysis.machine_facts import MachineFacts, results_facts
from sbprof.analysis.distributed import RunAnalysis, RunSummary, rank_payload, summarise_run
from sbprof.analysis.rank_rows import MissingRank
from sbprof.analysis.limits import Limits, Verdict, limits
from sbprof.analysis.world_scaling import ScalingRow, scaling_rows
from sbprof.base.errors import ConfigError
from sbprof.analysis.figures import Outcome, cell_sort_key
from sbprof.record import Measurement
from sbprof.record.cell import Cell
from sbprof.record.codec import Codec, from_json
from sbprof.record.measurement import MemoryPeak
from sbprof.record.params import ParamCount
from sbprof.record.payload import Payload
from sbprof.record.results import Results
from sbprof.base.stats import summarise


@dataclass(frozen=True)
class FlopsPayload(Codec):
    """What the train worker saves under ``extra["flops"]``: FLOPs and MACs per measured step, per module."""

    per_step: List[float] = field(default_factory=list)
    macs_per_step: List[float] = field(default_factory=list)
    modules: Dict[str, List[float]] = field(default_factory=dict)  # label -> [forward, backward] per step
    untracked: Dict[str, int] = field(default_factory=dict)  # operator -> calls without a FLOP formula
    macs_by_precision: Dict[str, float] = field(default_factory=dict)  # over the measured steps, per precision
    forward_per_step: List[float] = field(default_factory=list)  # the forward pass's FLOPs per measured step
    conventions: str = ""  # the counting conventions the figures follow (sbprof.measuring.flops.CONVENTIONS)


@dataclass(frozen=True)
class TrainPayload(Payload):
    """A single-process train record's ``extra`` (each key optional)."""

    audio_s_per_step: List[float] = field(default_factory=list)
    flops: Optional[FlopsPayload] = None
    params: Optional[ParamCount] = None
    modules: Optional[ModuleBreakdown] = None
    modules_detailed: Optional[ModuleBreakdown] = None
    loadavg_1m: Optional[float] = None
    trace_files: List[str] = field(default_factory=list)
    precision: Optional[str] = None  # SpeechBrain's training precision (fp32; bf16 or fp16 under autocast)
    loss_per_step: List[float] = field(default_factory=list)  # every step of the timed fit, warm-up ones first
    tokens_per_step: List[float] = field(default_factory=list)  # target tokens of each measured step
    batch_of_step: List[int] = field(default_factory=list)  # the batch each measured step trained on
    memory_step_batch: Optional[int] = None  # the batch (the longest) of the step whose memory peak is measured


@dataclass(frozen=True)
class LaunchPayload(Payload):
    """A world launch's ``extra`` (a ``world_sizes`` study): the run it launched and where its rank files are."""

    run_id: str = "?"
    run_folder: str = "?"
    exit_code: Optional[int] = None  # torchrun's
    timed_out: bool = False  # stopped at the deadline


def payload(m: Measurement) -> TrainPayload:
    """The record's ``extra``, typed."""
    return from_json(TrainPayload, m.extra, f"record {m.label!r}: extra")


def train_figures(m: Measurement) -> Dict[str, Any]:
    """Step time statistics, audio seconds trained per second, FLOPs per step, per audio second and per second.

    Example
    -------
    >>> m = Measurement(label="train:ctc", wall_s=[1.0, 2.0, 3.0], cpu_s=[0.5, 1.0, 1.5],
    ...                 extra={"audio_s_per_step": [4.0, 4.0, 4.0], "flops": {"per_step": [10.0, 10.0, 10.0]}})
    >>> f = train_figures(m)
    >>> f["step_s_median"], f["audio_s_per_s"], f["flops_per_audio_s"], round(f["achieved_flops_per_s"], 3)
    (2.0, 2.0, 2.5, 5.0)
    >>> f["cpu_s_median"], f["cpu_cost"]  # 3 core-seconds over 12 audio seconds
    (1.0, 0.25)
    """
    if not m.ok or not m.wall_s:
        return {}
    stats = summarise(m.wall_s)
    extra = payload(m)
    audio = extra.audio_s_per_step
    figures: Dict[str, Any] = {"step_s_median": stats.median, "step_s_q1": stats.q1, "step_s_q3": stats.q3,
                               "steps": len(m.wall_s)}
    if len(audio) == len(m.wall_s):
        figures["audio_s_per_s"] = sum(audio) / sum(m.wall_s)
    if m.cpu_s and len(m.cpu_s) == len(m.wall_s):
        cpu = summarise(m.cpu_s)
        figures.update(cpu_s_median=cpu.median, cpu_s_q1=cpu.q1, cpu_s_q3=cpu.q3)
        if len(audio) == len(m.cpu_s) and sum(audio) > 0:
            # Core-seconds per audio second: what a core spends per second of audio trained, whatever the wait.
            figures["cpu_cost"] = sum(m.cpu_s) / sum(audio)
    flops = extra.flops.per_step if extra.flops is not None else []
    if flops and len(flops) == len(m.wall_s):
        figures["flops_per_step"] = sum(flops) / len(flops)
        figures["achieved_flops_per_s"] = sum(flops) / sum(m.wall_s)
        if len(audio) == len(flops):
            figures["flops_per_audio_s"] = sum(flops) / sum(audio)
    return figures


@dataclass(frozen=True)
class TrainFigures(Codec):
    """:func:`train_figures` typed (a figure its record cannot give is ``None``)."""

    step_s_median: float
    step_s_q1: float
    step_s_q3: float
    steps: int
    audio_s_per_s: Optional[float] = None
    flops_per_step: Optional[float] = None
    achieved_flops_per_s: Optional[float] = None
    flops_per_audio_s: Optional[float] = None
    cpu_s_median: Optional[float] = None
    cpu_s_q1: Optional[float] = None
    cpu_s_q3: Optional[float] = None
    cpu_cost: Optional[float] = None


@dataclass(frozen=True)
class FlopsRow:
    """One module's FLOPs per step (forward, backward), its share of the step's FLOPs and of its time."""

    label: str
    depth: int
    forward: float
    backward: float
    flops_share: Optional[float]
    time_share: float


@dataclass(frozen=True)
class TrainCell:
    """One (variant, setting, run) of a training profile, with everything its section shows.

    ``cell``, ``outcome``, ``warmup`` and ``memory``: its record's cell, status and message, warm-up steps left out
    and peaks; ``cores``: the logical cores of the machine it ran on (``None`` when the record does not say);
    ``audio_s`` and ``audio_steps``: the audio seconds trained over the steps and how many steps they cover;
    ``macs_per_step``: mean MACs per step; ``other_load``: the 1-minute load beyond the worker's own threads
    (other work on the machine).
    """

    cell: Cell
    outcome: Outcome
    warmup: int
    memory: Optional[MemoryPeak]
    cores: Optional[int]
    payload: TrainPayload
    brain: str
    figures: Optional[TrainFigures]
    steps: Optional[BreakdownSteps]
    detailed_steps: Optional[BreakdownSteps]
    flops: List[FlopsRow]
    audio_s: float = 0.0
    audio_steps: int = 0
    macs_per_step: Optional[float] = None
    other_load: Optional[float] = None


@dataclass(frozen=True)
class WorldRun:
    """One launched world of a scaling study (variant, setting, scaling, world size, run): its ranks merged;
    ``launch``: the status and message of its launch record (``None`` without one)."""

    variant: str
    device: str
    threads: int
    world_size: int
    scaling: str
    run: int
    launch: Optional[Outcome]
    summary: RunSummary
    torchrun: str = "?"  # the launch's command line


@dataclass(frozen=True)
class ScalingTable:
    """One scaling study (a variant on a setting, strong or weak) over world sizes."""

    variant: str
    device: str
    threads: int
    scaling: str
    rows: List[ScalingRow]


@dataclass(frozen=True)
class TrainData(Codec):
    """The rules' ``data``: the mock-up batches."""

    num_batches: Optional[int] = None
    batch_size: Optional[int] = None
    scale: Optional[float] = None
    sample_rate: Optional[int] = None


@dataclass(frozen=True)
class TrainRules(Codec):
    """A training profile's rules, as its report's header names them."""

    data: Optional[TrainData] = None
    seed: Optional[int] = None
    warmup: Optional[int] = None
    measured: Optional[int] = None


@dataclass(frozen=True)
class TrainSummary:
    """Everything a training profile's report shows (see the module docstring)."""

    rules: TrainRules
    machine: MachineFacts
    cells: List[TrainCell]
    worlds: List[WorldRun] = field(default_factory=list)
    scaling: List[ScalingTable] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)


SINGLE_UNDECIDED = ("data loading, straggler, communication: a single-process training profile cycles mock-up "
                    "batches held in memory, on one rank (a world_sizes study measures the ranks)")


def train_limits(worlds: List[WorldRun]) -> Limits:
    """The verdicts of every launched world (each sentence names its world); without worlds, why none applies."""
    if not worlds:
        return Limits([], [SINGLE_UNDECIDED])
    candidates: List[Optional[Verdict]] = []
    undecided: List[str] = []
    for w in worlds:
        where = f"World of {w.world_size} ({w.variant} on {w.device}, {w.scaling or 'single'}, run {w.run})"
        candidates += [replace(v, sentence=f"{where}: {v.sentence}") for v in w.summary.limits.verdicts]
        undecided += [f"{where}: {u}" for u in w.summary.limits.undecided]
    return limits(candidates, undecided)


def _flops_rows(extra: TrainPayload) -> List[FlopsRow]:
    flops, breakdown = extra.flops, extra.modules
    if flops is None or not flops.modules or breakdown is None or not breakdown.rows:
        return []
    per_module = flops.modules
    total = sum(flops.per_step) / len(flops.per_step)
    return [FlopsRow(r.label, r.depth, *per_module[r.label],
                     flops_share=sum(per_module[r.label]) / total if total else None, time_share=r.share)
            for r in breakdown.rows if r.label in per_module]


def _audio_per_step(extra: TrainPayload) -> Optional[float]:
    """Mean seconds of audio per step of the breakdown, when its steps are the measured ones (same count)."""
    audio, breakdown = extra.audio_s_per_step, extra.modules
    if breakdown is None or not audio or len(audio) != breakdown.steps:
        return None
    return sum(audio) / len(audio)


def train_cell(m: Measurement) -> TrainCell:
    """One single-process record with every figure its section shows."""
    extra = payload(m)
    figures = train_figures(m)
    macs = extra.flops.macs_per_step if extra.flops is not None else []
    # The load counts this process's own threads: the rest is other work on the machine.
    other = None if extra.loadavg_1m is None else extra.loadavg_1m - m.cell.threads
    return TrainCell(cell=m.cell, outcome=Outcome.of(m), warmup=m.warmup, memory=m.memory,
                     cores=m.env.cpu_count if m.env is not None else None, payload=extra,
                     brain=str(m.settings.get("brain", "")),
                     figures=from_json(TrainFigures, figures) if figures else None,
                     steps=breakdown_steps(extra.modules, _audio_per_step(extra)),
                     detailed_steps=breakdown_steps(extra.modules_detailed),
                     flops=_flops_rows(extra), audio_s=sum(extra.audio_s_per_step),
                     audio_steps=len(extra.audio_s_per_step), macs_per_step=sum(macs) / len(macs) if macs else None,
                     other_load=other)


def world_runs(records: List[Measurement]) -> List[WorldRun]:
    """The records of a ``world_sizes`` study, one :class:`WorldRun` per launched world."""
    groups: Dict[Tuple[Any, ...], List[Measurement]] = {}
    for m in records:
        c = m.cell
        groups.setdefault((c.model, c.device, c.threads, c.params["world_size"], c.params.get("scaling", ""), c.run),
                          []).append(m)
    out = []
    for (variant, device, threads, size, scaling, run), members in sorted(groups.items()):
        launch = next((m for m in members if m.cell.rank is None), None)
        ranks = sorted((m for m in members if m.cell.rank is not None), key=lambda m: m.cell.rank)
        analysis = RunAnalysis(size)
        for m in ranks:
            if m.ok:
                analysis.add_steps(m)
        for m in ranks:
            if m.ok:
                analysis.add_rank(m)
            else:
                analysis.add_missing(MissingRank(m.cell.rank, rank_payload(m).rank.last_step, m.message))
        info = (from_json(LaunchPayload, launch.extra, f"record {launch.label!r}: extra") if launch is not None
                else LaunchPayload())
        backend = next((str(m.settings["distributed"].get("backend")) for m in ranks
                        if "distributed" in m.settings), "n/a")
        summary = summarise_run(analysis, info.run_id, backend, info.run_folder)
        out.append(WorldRun(variant, device, threads, size, scaling, run,
                            None if launch is None else Outcome.of(launch), summary,
                            str(launch.settings.get("torchrun", "?")) if launch is not None else "?"))
    return out


def scaling_tables(worlds: List[WorldRun], cores: int) -> List[ScalingTable]:
    """Per variant, setting and scaling: the worlds against the world of size 1 (measured once, both scalings')."""
    tables = []
    for variant, device, threads in sorted({(w.variant, w.device, w.threads) for w in worlds}):
        mine = [w for w in worlds if (w.variant, w.device, w.threads) == (variant, device, threads)]
        for scaling in ("strong", "weak"):
            chosen = [w for w in mine if w.scaling == scaling or w.world_size == 1]
            if not any(w.scaling == scaling for w in chosen):
                continue
            points = [(w.world_size, threads, cores, w.summary.sections[0] if w.summary.sections else None)
                      for w in chosen]
            tables.append(ScalingTable(variant, device, threads, scaling, scaling_rows(points)))
    return tables


def analyse(results: Results) -> TrainSummary:
    """The one analysis of a training profile's results (see the module docstring).

    A measured single-process record without step times (a hand-edited file) is refused, naming it: its row
    would have no figure to show.
    """
    single = [m for m in results.records if "world_size" not in m.cell.params]
    for m in single:
        if m.ok and not m.wall_s:
            raise ConfigError(f"record {m.label!r}: measured (status ok) but its field 'wall_s' holds no step times")
    cells = [train_cell(m) for m in sorted(single, key=cell_sort_key)]
    worlds = world_runs([m for m in results.records if "world_size" in m.cell.params])
    cores = int(results.machine.get("cpu_count") or 1)
    return TrainSummary(rules=from_json(TrainRules, dict(results.rules), "rules"),
                        machine=results_facts(results), cells=cells, worlds=worlds,
                        scaling=scaling_tables(worlds, cores), limits=train_limits(worlds))
