"""The analysis of ``sbprof run --vary``: each variant's figures over its runs, its ratio to the base, the loss
check, the ranking and the winner.

Each run (a fresh ``sbprof run`` process) gives one figure of each kind from
its main stage's measured steps (``train`` when there is one, else the
first stage the base ran): the throughput (audio seconds, utterances, or
steps per second of the loop: summed units over the summed loop time, data
wait and the time between steps included, so that a change in data loading
shows), the median step time, the data-wait share of the loop, the peak
memory, and the CPU cost: the CPU seconds of the measured loop's iterations
(data wait, between and step, from one step's end to the next's), this
process's and its DataLoader workers' (:mod:`sbprof.script.loop_cpu`), per
audio second, per utterance or per step, with the workers' share apart
(results of an sbprof without them: the steps' own CPU). A variant's figure is the median over its runs with
the distribution-free interval of :func:`~sbprof.analysis.intervals.interval_over_runs`;
its ratio to the base is the gate's run-level statistic
(:func:`~sbprof.analysis.verdict.compare_runs`: Hodges-Lehmann ratio with the
exact Mann-Whitney interval), and a ratio whose interval includes 1 is "no
change the runs can show".

The loss check: the losses of a variant's first steps (its first run that
recorded any) against the base's, step by step; the largest difference,
relative to the largest loss the base had reached by that step, must stay
within the tolerance, and every loss must be finite. (Relative to the
base's loss at that step alone, a loss that fell a thousandfold would count
its last digits: two threads' reduction order moved SpeechBrain's
``speaker_id`` example's 6e-5 by 15 %, 0.01 % of its first loss.)
A variant that changes the script's own arguments (a batch size) sees other
batches, so its losses are not compared, and the report says so, unless
they stay within the tolerance (arguments the script ignored, or that leave
the math alone: the report then gives the change) or are not finite
(flagged, as for any variant). A
variant that fails the check is flagged and never ranked; the winner is the
ranked variant with the highest throughput ratio whose interval lies above 1.
Adaptive repeats (:func:`imprecise`) ask for another round while a
variant that keeps the loss has a throughput ratio whose interval is wider
than :data:`PRECISION`; the rule looks at the interval's width only, never
at whether it includes 1, so looking again after each round does not make a
change out of noise more likely to be reported.
Under ``--try suggested`` each variant keeps the base run's verdict that
suggested it.

Example
-------
>>> round(loss_change([1.0, 0.5], [1.001, 0.5]), 9), loss_change([1.0], [None])
(0.001, inf)
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.figures import peak_gb
from sbprof.analysis.gate import min_runs
from sbprof.analysis.intervals import RunInterval, interval_over_runs
from sbprof.analysis.limits import Limits
from sbprof.analysis.run import run_limits, run_payload, stage_figures
from sbprof.analysis.run_steps import of_role
from sbprof.analysis.verdict import Verdict, compare_runs
from sbprof.record import Measurement
from sbprof.record.results import Results

CONFIDENCE = 0.95
FIGURES: Dict[str, Tuple[str, bool]] = {
    "audio_per_s": ("audio seconds per second", False),
    "utterances_per_s": ("utterances per second", False),
    "steps_per_s": ("steps per second", False),
    "step_s": ("step time (s)", True),
    "wait_share": ("data-wait share of the loop", True),
    "peak_gb": ("peak memory (GB)", True),
    "cpu_cost": ("CPU cost", True),
    "workers_cpu_share": ("DataLoader workers' share of the CPU cost", True),
}
"""Each figure: its name for people, and whether lower is better."""
THROUGHPUTS = ("audio_per_s", "utterances_per_s", "steps_per_s")
PRECISION = 0.10
"""The default of ``--precision``: adaptive repeats add rounds while a ranked variant's throughput ratio is known
only to worse than this, the relative half-width of its interval, ``sqrt(high / low) - 1``."""
MAX_ROUNDS = 8
"""The default of ``--max-rounds``: the most rounds adaptive repeats may reach."""
TOO_FEW_RUNS = "run(s) a side: an interval needs 3"
"""The end of a figure's reason for no ratio when more runs would give one."""


def loss_change(base: Sequence[Optional[float]], variant: Sequence[Optional[float]]) -> float:
    """The largest difference of ``variant``'s losses from ``base``'s over the steps both took, each relative to
    the largest loss the base had reached by that step (``inf`` when a loss is not finite: ``None`` in the
    results).

    Example
    -------
    >>> round(loss_change([0.68, 0.078, 6e-5], [0.68, 0.078, 7e-5]), 6)  # a fallen loss's last digits: 1e-5 of 0.68
    1.5e-05
    >>> round(loss_change([2.0, 4.0], [2.0, 3.0]), 6)  # a rising loss: relative to its own value
    0.25
    """
    worst, scale = 0.0, 0.0
    for b, v in zip(base, variant):
        if b is None or v is None or not (math.isfinite(b) and math.isfinite(v)):
            return math.inf
        scale = max(scale, abs(b))
        worst = max(worst, abs(v - b) / max(scale, 1e-12))
    return worst


def ratio_level(runs: int) -> Optional[float]:
    """The level of a ratio's interval with ``runs`` runs a side: 95 % from 4 runs (the gate's), 90 % with 3,
    none with fewer.

    Example
    -------
    >>> ratio_level(4), ratio_level(3), ratio_level(2)
    (0.95, 0.9, None)
    """
    return CONFIDENCE if runs >= min_runs(CONFIDENCE) else (0.9 if runs >= min_runs(0.89) else None)


def run_figures(m: Measurement) -> Dict[str, float]:
    """One run's figures (see the module docstring) from its stage record; a figure it cannot give is left out."""
    extra = run_payload(m)
    roles = extra.roles
    wait = [float(x or 0.0) for x in of_role(roles, extra.data_wait_s, "measured")]
    between = [float(x or 0.0) for x in of_role(roles, extra.between_s, "measured")]
    utterances = of_role(roles, extra.utterances, "measured")
    audio = of_role(roles, extra.audio_s, "measured")
    steps = list(m.wall_s)
    if not steps or len(wait) != len(steps):
        return {}
    between = between if len(between) == len(steps) else [0.0] * len(steps)
    loop = sum(wait) + sum(between) + sum(steps)
    out = {"steps_per_s": len(steps) / loop, "step_s": statistics.median(steps), "wait_share": sum(wait) / loop}
    units = len(steps)
    if all(isinstance(u, int) for u in utterances) and utterances:
        out["utterances_per_s"] = sum(utterances) / loop
        units = sum(utterances)
    if all(isinstance(a, (int, float)) for a in audio) and audio and sum(audio) > 0:
        out["audio_per_s"] = sum(audio) / loop
        units = sum(audio)
    loop_cpu = of_role(roles, extra.loop_cpu_s, "measured")
    if len(loop_cpu) == len(steps) and all(isinstance(c, (int, float)) for c in loop_cpu):
        out["cpu_cost"] = sum(loop_cpu) / units
        workers = of_role(roles, extra.workers_cpu_s, "measured")
        out["workers_cpu_share"] = sum(workers) / sum(loop_cpu) if sum(loop_cpu) > 0 else 0.0
    elif m.cpu_s and len(m.cpu_s) == len(steps):  # results of an sbprof without the loop's CPU: the steps' own
        out["cpu_cost"] = sum(m.cpu_s) / units
    peak = peak_gb(m)
    if peak is not None:
        out["peak_gb"] = peak
    return out


@dataclass
class Figure:
    """One figure of a variant: over its runs, and its ratio to the base (``None`` for the base itself, or
    when a side has a zero or too few runs)."""

    name: str
    over_runs: RunInterval
    ratio: Optional[Verdict] = None
    no_ratio: Optional[str] = None  # why a variant's figure has no ratio (too few runs, a zero, none in the base)

    @property
    def no_change(self) -> bool:
        """The ratio's interval includes 1: no change the runs can show."""
        return self.ratio is not None and self.ratio.low <= 1 <= self.ratio.high


@dataclass
class VariantResult:
    """A variant's outcome: its runs, figures, loss check, failures, and what limits it (its first run)."""

    name: str
    changes: List[Tuple[str, Any]]
    runs: int
    failures: List[str] = field(default_factory=list)
    figures: Dict[str, Figure] = field(default_factory=dict)
    loss_change: Optional[float] = None  # None: no loss to compare (inference, or the base recorded none)
    loss_steps: int = 0
    loss_ok: bool = True
    loss_compared: bool = True  # False: the variant changes the script's arguments, so its batches
    limits: Limits = field(default_factory=Limits)
    suggested_by: Optional[str] = None  # --try suggested: the base run's verdict that suggested this variant

    @property
    def measured(self) -> bool:
        return self.runs > 0


@dataclass
class VaryReport:
    """The comparison: its variants (base first), the throughput it ranks on, the ranking and the winner."""

    script: str
    stage: str
    throughput: str
    rounds: int
    loss_tolerance: float
    variants: List[VariantResult]
    ranking: List[str] = field(default_factory=list)
    winner: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    confidence: float = CONFIDENCE
    precision: float = PRECISION  # adaptive repeats' target (--precision)

    def runs_confidence(self) -> float:
        """The level the figures' intervals over runs reach: the lowest (4 runs give [min, max], 87.5 %, not the
        95 % asked); the asked one when no figure has a spread.

        Example
        -------
        >>> figure = Figure("steps_per_s", interval_over_runs([1.0, 1.1, 1.2, 1.3]))
        >>> report = VaryReport("x.py", "train", "steps_per_s", 4, 0.02, [VariantResult("base", [], 4,
        ...                     figures={"steps_per_s": figure})])
        >>> report.runs_confidence()
        0.875
        """
        levels = [f.over_runs.confidence for v in self.variants for f in v.figures.values() if f.over_runs.confidence]
        return min(levels, default=self.confidence)


def main_stage(records: List[Measurement], base: str) -> str:
    """The stage a comparison's figures come from: ``train`` when the base ran one, else the base's first stage."""
    stages = [m.cell.variant for m in records if m.ok and m.cell.params.get("variant") == base]
    return "train" if "train" in stages else (stages[0] if stages else "train")


def _variant(name: str, changes: List[Tuple[str, Any]], records: List[Measurement], stage: str,
             base_runs: Optional[Dict[str, List[float]]], base_losses: List[float], tolerance: float,
             same_batches: bool = True) -> VariantResult:
    mine = [m for m in records if m.cell.params.get("variant") == name]
    failures = [f"round {m.cell.run + 1}: {m.message}" for m in mine if not m.ok]
    ok = sorted((m for m in mine if m.ok and m.cell.variant == stage), key=lambda m: m.cell.run)
    result = VariantResult(name, changes, len(ok), failures)
    per_run = [run_figures(m) for m in ok]
    for key, (_, lower_is_better) in FIGURES.items():
        values = [f[key] for f in per_run if key in f]
        if len(values) != len(ok) or not values or not all(math.isfinite(v) for v in values):
            continue
        figure = Figure(key, interval_over_runs(values, CONFIDENCE))
        base = (base_runs or {}).get(key, [])
        level = ratio_level(min(len(base), len(values)))
        if base_runs is None:  # this is the base
            pass
        elif not base:
            figure.no_ratio = "the base has no such figure" if base_runs else "the base has no successful run"
        elif level is None:
            figure.no_ratio = f"{min(len(base), len(values))} {TOO_FEW_RUNS}"
        elif min(base) > 0 and min(values) > 0:
            figure.ratio = compare_runs([[b] for b in base], [[v] for v in values], threshold=0.0,
                                        confidence=level, lower_is_better=lower_is_better)
        else:
            figure.no_ratio = "a run read zero"
        result.figures[key] = figure
    losses = next((run_payload(m).losses for m in sorted(mine, key=lambda m: m.cell.run)
                   if m.ok and run_payload(m).losses), None)
    if losses and base_losses:
        change = loss_change(base_losses, losses)
        # Other arguments (a batch size...) give other batches: their losses are compared only when they stay within
        # the tolerance (arguments the script ignored, or that leave the math alone) or are not finite.
        if same_batches or change <= tolerance or any(v is None for v in losses):
            result.loss_steps = min(len(losses), len(base_losses))
            result.loss_change = change
            result.loss_ok = change <= tolerance
        else:
            result.loss_compared = False
    elif not same_batches:
        result.loss_compared = False
    if ok:
        result.limits = run_limits([stage_figures(m) for m in mine if m.ok and m.cell.run == ok[0].cell.run])
    return result


def analyse(results: Results) -> VaryReport:
    """The comparison's report from its records (see the module docstring)."""
    rules = results.rules
    variants = rules.get("variants") or []
    names = [v["name"] for v in variants]
    records = list(results.records)
    base = names[0] if names else "base"
    stage = main_stage(records, base)
    base_ok = sorted((m for m in records if m.ok and m.cell.params.get("variant") == base and m.cell.variant == stage),
                     key=lambda m: m.cell.run)
    base_figs = [run_figures(m) for m in base_ok]
    base_runs = {k: [f[k] for f in base_figs] for k in FIGURES if base_figs and all(k in f for f in base_figs)}
    base_losses = next((run_payload(m).losses for m in base_ok if run_payload(m).losses), None) or []
    tolerance = float(rules.get("loss_tolerance", 0.02))
    out: List[VariantResult] = []
    for i, v in enumerate(variants):
        same_batches = v.get("args", []) == variants[0].get("args", [])
        result = _variant(v["name"], [tuple(c) for c in v.get("changes", [])], records, stage,
                          base_runs if i else None, base_losses if i else [], tolerance, same_batches)
        result.suggested_by = (rules.get("suggested") or {}).get(v["name"])
        out.append(result)
    throughput = next((k for k in THROUGHPUTS if k in base_runs), "steps_per_s")
    report = VaryReport(script=str(rules.get("script") or rules.get("module")), stage=stage, throughput=throughput,
                        rounds=int(rules.get("rounds", 0)), loss_tolerance=tolerance, variants=out,
                        notes=list(results.notes), precision=float(rules.get("precision", PRECISION)))
    ranked = [r for r in out[1:] if r.measured and r.loss_ok and throughput in r.figures
              and r.figures[throughput].ratio is not None]
    ranked.sort(key=lambda r: -r.figures[throughput].ratio.ratio)
    report.ranking = [r.name for r in ranked]
    faster = [r for r in ranked if r.figures[throughput].ratio.low > 1]
    report.winner = faster[0].name if faster else None
    return report


def half_width(f: Figure) -> float:
    """The relative half-width of a figure's ratio interval, ``sqrt(high / low) - 1`` (``inf`` without one).

    Example
    -------
    >>> f = Figure("steps_per_s", interval_over_runs([1.0, 1.0, 1.0]), ratio=None)
    >>> half_width(f)
    inf
    """
    r = f.ratio
    if r is None or not (r.low > 0 and math.isfinite(r.high)):
        return math.inf
    return math.sqrt(r.high / r.low) - 1


def imprecise(report: VaryReport, target: float = PRECISION) -> Dict[str, float]:
    """The variants that keep the loss whose throughput ratio is wider than ``target`` (its relative half-width,
    :func:`half_width`): name -> half-width. Empty: every ratio is as precise as asked, so no more rounds.

    Whether an interval includes 1 plays no part: the rule stops on precision alone (see the module docstring).
    A ratio that more runs cannot give (the base never ran, a run read zero) asks for no round.
    """
    out: Dict[str, float] = {}
    for v in report.variants[1:]:
        if not v.measured or not v.loss_ok:
            continue  # failed, or flagged: more rounds would not rank it
        f = v.figures.get(report.throughput)
        if f is not None and f.ratio is None and f.no_ratio and not f.no_ratio.endswith(TOO_FEW_RUNS):
            continue  # a reason no round can change
        width = half_width(f) if f is not None else math.inf
        if width > target:
            out[v.name] = width
    return out
