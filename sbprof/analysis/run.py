"""An ``sbprof run`` analysed once: per stage, the figures its report shows, from the raw samples of its record.

What the run saves in a stage's ``extra`` is read as a :class:`RunPayload`.
Pure: no torch, no clocks. Every figure is derived from the measured steps
(the warm-up ones are left out), as :data:`DEFINITIONS` says.

Example
-------
>>> from sbprof.record import Cell, Measurement, Results
>>> m = Measurement("t:train", Cell(model="t", variant="train"), warmup=1, wall_s=[0.1, 0.3, 0.2],
...                 extra={"kind": "loop", "data_wait_s": [9, 0.1, 0.1, 0.2], "forward_s": [9, .05, .1, .1],
...                        "backward_s": [0] * 4, "optimizer_s": [0] * 4, "utterances": [2] * 4,
...                        "audio_s": [4.0] * 4})
>>> s = analyse(Results("run", records=[m])).stages[0]
>>> s.step.median, round(s.data_wait_share, 3), round(s.utterances_per_s, 6), round(s.forward_share, 3)
(0.2, 0.4, 10.0, 0.417)
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from sbprof.analysis.breakdown import BreakdownSteps, ModuleBreakdown, ModuleRow, breakdown_steps
from sbprof.analysis.limits import Limits, Verdict, data_loading, dispatch_bound, limits
from sbprof.analysis.machine_facts import MachineFacts, results_facts
from sbprof.analysis.run_steps import LoopShares, TraceCost, loop_shares, of_role, role_runs, trace_cost
from sbprof.record import Measurement, MemoryPeak
from sbprof.record.codec import Codec, from_json
from sbprof.record.params import ModuleParams, ParamCount
from sbprof.record.payload import Payload
from sbprof.record.results import Results
from sbprof.base.stats import Stats, rtf, rtfx, summarise

OTHER = "(other)"

DEFINITIONS = {
    "step": "one Brain batch (fit_batch / evaluate_batch), one inference call, or in a plain loop the span from "
            "the first model call with gradients to the end of Optimizer.step",
    "step time": "wall-clock time of a measured step: median and interquartile range [q1, q3] over the "
                 "measured steps (warm-up steps left out); steps/s = 1 / median",
    "utterances/s, audio s/s": "utterances and seconds of audio (a PaddedBatch's `sig` lengths) over the "
                               "measured steps, divided by their summed step time",
    "RTF, RTFx": "summed step time / summed audio seconds, and its inverse (inference calls)",
    "CPU time, CPU cost": "the process's CPU time during a measured step (all its threads; median [q1, q3]), and "
                          "summed CPU time / summed audio seconds (core-seconds per audio second): what a core "
                          "spends, independent of waiting for one; with several threads it includes threads that "
                          "spin while waiting (OpenMP)",
    "steps": "each stage's steps in order, each with one role: warm-up (left out of every figure; the last one "
             "counts FLOPs), measured (no profiler, no per-module hooks: every timing figure), one memory step, "
             "per-module steps, traced steps (torch's profiler); a stage with fewer batches than --warmup + 1 is "
             "measured with a smaller warm-up",
    "loop: data wait, between, step": "one iteration of the loop that runs the measured steps: data wait = time "
                                      "inside DataLoader iterators' __next__ before the step; between = the rest "
                                      "of the iteration outside the step (preprocessing, moving to the device, "
                                      "augmentation, logging: from the stage's previous step, or at its first "
                                      "step after another stage from its first __next__, to the step's start); "
                                      "each as a share of their sum over the measured steps",
    "forward, backward, optimiser": "time inside outermost nn.Module calls, torch.autograd.backward and "
                                    "Optimizer.step, each region's own (a closure optimiser's forward and "
                                    "backward count as forward and backward), as shares of the summed step time",
    "per-module time": "light attribution (clocks at each module boundary, forward and backward) on the stage's "
                       "per-module steps, ms per step (mean), the largest first; a module's time includes its "
                       "children's; share = its time / those steps' mean time; (other) = the step's time outside "
                       "every module",
    "per-module CPU ms, CPU cost": "the process's CPU time (all its threads) while the module ran, forward + "
                                   "backward, ms per per-module step (mean); CPU cost = that / 1000 / the mean "
                                   "audio seconds of those steps (core-seconds per audio second; n/a without "
                                   "PaddedBatch lengths)",
    "FLOPs per step": "FLOPs of every operator with a formula in the stage's FLOP step (its batch shapes: "
                      "forward, backward and the optimiser's update; sbprof.measuring.flops conventions); achieved "
                      "FLOP/s = FLOPs per step / median step time; share of peak = achieved / the device's peak "
                      "at the precision that did most of the counted MACs (CPU: a matrix-product probe in it, "
                      "once per machine, kept in the user's cache; GPU: the datasheet's dense figure, none for "
                      "a GPU not in sbprof's table)",
    "operators per step, dispatch floor": "aten operators dispatched in the FLOP step (below autograd: forward, "
                                          "backward and the optimiser's update, views included); CPU per operator "
                                          "= median step CPU time / operators per step; the floor: median CPU "
                                          "time of `x = x + 1` on a 1-element tensor in a Python loop, measured "
                                          "once after the script, with no profiler, as the measured steps ran",
    "peak memory": "of the stage's memory step: resident set (its peak: VmHWM after the step - RSS at its start, "
                   "with freed heap handed back first, CPU) or the CUDA allocator's peak over the step (GPU)",
    "trace, trace cost": "torch's profiler over the traced steps, one file per stage (a stage whose traced steps "
                         "another stage's steps interrupt gets one file per run of them); at most a cap of events "
                         "(10 % of the resident memory at 1.75 kB an event), past which collection stops inside "
                         "the step (cut); cost = median wall time of the steps traced whole / median measured step",
}


@dataclass(frozen=True)
class RunFlops(Codec):
    """``extra["flops"]``: the FLOPs of one step (the last warm-up one), its forward and backward parts, its
    multiply-accumulates (in all, and by the precision they ran in) and the operators without a formula."""

    total: Optional[float] = None
    untracked: Dict[str, int] = field(default_factory=dict)
    forward: Optional[float] = None
    backward: Optional[float] = None
    macs: Optional[float] = None
    macs_by_precision: Dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PeakFlops(Codec):
    """``extra["peak_flops"]``: the device's peak FLOP/s at the precision of the work, and where it comes from; no
    figure (``flops_per_s`` None) when it is unknown, ``source`` then says why."""

    flops_per_s: Optional[float] = None
    precision: str = ""
    source: str = ""
    device: str = ""
    detail: str = ""  # how it was had (a probe's shape and threads, when, and the cache that keeps it)


@dataclass(frozen=True)
class RunBrain(Codec):
    """``extra["brain"]``: which Brain ran the stage (its class, and its number in the script)."""

    number: int = 1
    class_name: str = ""


@dataclass(frozen=True)
class RunTrace(Codec):
    """``extra["trace"]``: the stage's trace files, its events, the cap and where it was cut."""

    files: List[str] = field(default_factory=list)
    events: int = 0
    cap: int = 0
    cut_in_step: Optional[int] = None
    skipped: Optional[str] = None
    steps: List[int] = field(default_factory=list)


@dataclass(frozen=True)
class RunPayload(Payload):
    """What ``sbprof run`` saves in a stage's ``extra``: per-step lists over every step (warm-up ones first)."""

    kind: Optional[str] = None
    roles: List[str] = field(default_factory=list)
    between_s: List[Optional[float]] = field(default_factory=list)
    all_wall_s: List[float] = field(default_factory=list)
    all_cpu_s: List[float] = field(default_factory=list)
    why: Dict[str, str] = field(default_factory=dict)
    stage_notes: List[str] = field(default_factory=list)
    brain: Optional[RunBrain] = None
    trace: Optional[RunTrace] = None
    utterances: List[Optional[float]] = field(default_factory=list)
    audio_s: List[Optional[float]] = field(default_factory=list)
    data_wait_s: List[float] = field(default_factory=list)
    forward_s: List[float] = field(default_factory=list)
    backward_s: List[float] = field(default_factory=list)
    optimizer_s: List[float] = field(default_factory=list)
    flops: Optional[RunFlops] = None
    peak_flops: Optional[PeakFlops] = None
    modules: Optional[ModuleBreakdown] = None
    params: Optional[ParamCount] = None
    traces: List[str] = field(default_factory=list)
    operators_per_step: Optional[float] = None
    dispatch_floor_s: Optional[float] = None
    seen: int = 0  # the stage's steps begun, recorded or not
    warmup: Optional[int] = None  # the steps before the first measured one
    memory: Optional[Dict[str, Any]] = None  # the memory step's peaks (the record's ``memory`` reads them)
    plan: Optional[Dict[str, Any]] = None  # the stage's planned steps: warm-up, measured and their sequence
    losses: List[Optional[float]] = field(default_factory=list)  # a --vary round's losses (None: not finite)
    loop_cpu_s: List[Optional[float]] = field(default_factory=list)  # a --vary run's: each step's loop, workers too
    workers_cpu_s: List[Optional[float]] = field(default_factory=list)  # ... and its DataLoader workers' part


@dataclass
class StageFigures:
    """The figures of one stage (see :data:`DEFINITIONS`)."""

    stage: str
    kind: str
    warmup: int
    step: Optional[Stats]
    steps_per_s: Optional[float]
    utterances_per_s: Optional[float] = None
    audio_s_per_s: Optional[float] = None
    rtf: Optional[float] = None
    rtfx: Optional[float] = None
    data_wait_share: Optional[float] = None
    data_wait_s: Optional[float] = None  # median over the measured steps
    forward_share: Optional[float] = None
    backward_share: Optional[float] = None
    optimizer_share: Optional[float] = None
    flops_per_step: Optional[float] = None
    achieved_flops_per_s: Optional[float] = None
    share_of_peak: Optional[float] = None
    peak_source: Optional[str] = None
    modules: List[ModuleRow] = field(default_factory=list)
    modules_steps: Optional[BreakdownSteps] = None  # the breakdown's step figures, CPU cost per row included
    untracked: List[str] = field(default_factory=list)  # operators without a FLOP formula
    memory: Optional[MemoryPeak] = None
    params: Optional[int] = None
    trainable_params: Optional[int] = None
    params_rows: List[ModuleParams] = field(default_factory=list)  # top-level modules with parameters
    traces: List[str] = field(default_factory=list)
    operators_per_step: Optional[float] = None
    cpu_per_operator_s: Optional[float] = None
    dispatch_floor_s: Optional[float] = None
    cpu_step: Optional[Stats] = None  # CPU time per measured step
    cpu_cost: Optional[float] = None  # summed CPU time / summed audio seconds (core-seconds per audio second)
    loop: Optional[LoopShares] = None  # data wait, time between and step as shares of the loop
    role_runs: List[Tuple[str, int, int]] = field(default_factory=list)  # which steps had which role
    trace: Optional[RunTrace] = None
    trace_cost: Optional[TraceCost] = None
    why: Dict[str, str] = field(default_factory=dict)  # figure role -> why it is n/a
    notes: List[str] = field(default_factory=list)  # the stage's own (a smaller warm-up...)
    brain: Optional[RunBrain] = None


@dataclass(frozen=True)
class RunRules(Codec):
    """What was run and how (the rules' ``continue``, a Python keyword, is read as :attr:`RunReport.continued`)."""

    script: Optional[str] = None
    module: Optional[str] = None
    args: List[str] = field(default_factory=list)
    warmup: Optional[int] = None
    measured: Optional[int] = None


@dataclass
class RunReport:
    """Every stage of one run, with the run's rules, machine and notes; ``continued``: the script went on after
    its measured steps (``--continue``)."""

    rules: RunRules
    machine: MachineFacts
    notes: List[str]
    stages: List[StageFigures]
    continued: bool = False
    limits: Limits = field(default_factory=Limits)

    @property
    def traces(self) -> List[str]:
        """Every stage's trace files, each once, sorted."""
        return sorted({t for s in self.stages for t in s.traces})


def run_payload(m: Measurement) -> RunPayload:
    """The stage record's ``extra``, typed."""
    return from_json(RunPayload, m.extra, f"record {m.label!r}: extra")


def _measured(m: Measurement, values: List[Any]) -> List[Any]:
    return list(values[m.warmup:m.warmup + len(m.wall_s)])


def stage_figures(m: Measurement) -> StageFigures:
    """The figures of one stage's record."""
    extra = run_payload(m)
    kind = extra.kind if extra.kind is not None else m.settings.get("kind", "")
    fig = StageFigures(m.cell.variant or m.label, kind, m.warmup, None, None, role_runs=role_runs(extra.roles),
                       trace=extra.trace, why=dict(extra.why), notes=list(extra.stage_notes), brain=extra.brain,
                       traces=list(extra.traces))
    if not m.wall_s:
        return fig
    _timing(fig, m, extra)
    _counts(fig, m, extra)
    return fig


def _timing(fig: StageFigures, m: Measurement, extra: RunPayload) -> None:
    """The figures of the measured steps: step and CPU time, throughput, the loop, the split, the trace's cost."""
    step = summarise(m.wall_s)
    total = sum(m.wall_s)
    fig.step, fig.steps_per_s = step, 1.0 / step.median
    utterances, audio = _measured(m, extra.utterances), _measured(m, extra.audio_s)
    if utterances and all(u is not None for u in utterances):
        fig.utterances_per_s = sum(utterances) / total
    if m.cpu_s and len(m.cpu_s) == len(m.wall_s):
        fig.cpu_step = summarise(m.cpu_s)
    if audio and all(a is not None for a in audio) and sum(audio) > 0:
        fig.audio_s_per_s = sum(audio) / total
        fig.rtf, fig.rtfx = rtf(total, sum(audio)), rtfx(total, sum(audio))
        if fig.cpu_step is not None:
            fig.cpu_cost = sum(m.cpu_s) / sum(audio)
    wait = _measured(m, extra.data_wait_s)
    if wait:
        fig.loop = loop_shares(wait, _measured(m, extra.between_s), m.wall_s)
        fig.data_wait_share = fig.loop.wait_share if fig.loop is not None else None
        fig.data_wait_s = statistics.median(wait)
    for region in ("forward", "backward", "optimizer"):
        values = _measured(m, getattr(extra, f"{region}_s"))
        if values:
            setattr(fig, f"{region}_share", sum(values) / total)
    fig.trace_cost = trace_cost(extra.roles, extra.all_wall_s, extra.all_cpu_s, m.wall_s, m.cpu_s)


def _counts(fig: StageFigures, m: Measurement, extra: RunPayload) -> None:
    """The figures of the other steps: operators and FLOPs (FLOP step), modules, memory, parameters."""
    flops = extra.flops or RunFlops()
    fig.untracked, fig.memory = sorted(flops.untracked), m.memory
    if m.counts is not None:
        fig.params, fig.trainable_params = m.counts.params, m.counts.trainable_params
    fig.params_rows = [r for r in (extra.params.modules if extra.params is not None else []) if r.total and
                       r.depth == 1]
    if extra.operators_per_step and extra.dispatch_floor_s and m.cpu_s:
        fig.operators_per_step, fig.dispatch_floor_s = extra.operators_per_step, extra.dispatch_floor_s
        fig.cpu_per_operator_s = statistics.median(m.cpu_s) / extra.operators_per_step
    if flops.total:
        fig.flops_per_step = float(flops.total)
        fig.achieved_flops_per_s = flops.total / fig.step.median
        peak = extra.peak_flops
        if peak and peak.flops_per_s and fig.achieved_flops_per_s > peak.flops_per_s:
            # More than the peak is no share: the probe read low (a busy machine when it ran) or the work's
            # kernels outrun its torch.mm. Said, never printed as a share above 100 %.
            again = "; delete peak_flops.json in sbprof's cache to probe again" if "probe" in peak.source else ""
            fig.peak_source = (f"achieved is above the peak, {peak.flops_per_s / 1e9:.3g} GFLOP/s {peak.precision}, "
                               f"{peak.source}: the peak read low{again}")
        elif peak and peak.flops_per_s:
            fig.share_of_peak = fig.achieved_flops_per_s / peak.flops_per_s
            fig.peak_source = f"{peak.flops_per_s / 1e9:.3g} GFLOP/s {peak.precision}, {peak.source}"
        elif peak:
            fig.peak_source = peak.source
    # The audio per step of the breakdown's own steps (its per-module steps; the measured ones in older records),
    # only when they are its steps (the same count), every one known.
    audio = of_role(extra.roles, extra.audio_s, "modules") if extra.roles else _measured(m, extra.audio_s)
    known = extra.modules is not None and len(audio) == extra.modules.steps and all(a is not None for a in audio)
    fig.modules_steps = breakdown_steps(extra.modules, sum(audio) / len(audio) if known and audio else None)
    rows = extra.modules.rows if extra.modules is not None else []
    # Modules largest first; the step's time outside every module ("(other)") last: it is not a module.
    fig.modules = sorted(rows, key=lambda r: (r.label == OTHER, -r.total_ms))
    return fig


def _in_stage(stage: str, verdict: Optional[Verdict]) -> Optional[Verdict]:
    return None if verdict is None else replace(verdict, sentence=f"Stage `{stage}`: {verdict.sentence}")


def run_limits(stages: List[StageFigures]) -> Limits:
    """What limits each stage: data loading (the data wait's share of the loop: wait, between, step) and dispatch-bound
    (operators per step, CPU per operator, dispatch floor); a stage without the dispatch figures says why."""
    candidates: List[Optional[Verdict]] = []
    undecided = []
    for s in stages:
        if s.step is None:
            continue
        if s.loop is not None:
            between = s.loop.between_s if s.loop.between_read else None
            candidates.append(_in_stage(s.stage, data_loading(s.loop.wait_s, s.loop.step_s, between)))
        if s.cpu_per_operator_s is None:
            why = s.why.get("flops") or "results from an sbprof that did not record it"
            undecided.append(f"dispatch-bound ({s.stage}): no operator count ({why})")
        else:
            candidates.append(_in_stage(s.stage, dispatch_bound(s.operators_per_step, s.cpu_per_operator_s,
                                                                s.dispatch_floor_s)))
    return limits(candidates, undecided)


def analyse(results: Results) -> RunReport:
    """The run's report: one :class:`StageFigures` per stage, in the order the stages first ran, and what limits
    them."""
    stages = [stage_figures(m) for m in results.records]
    return RunReport(rules=from_json(RunRules, dict(results.rules), "rules"),
                     machine=results_facts(results), notes=list(results.notes),
                     stages=stages, continued=bool(results.rules.get("continue")), limits=run_limits(stages))
