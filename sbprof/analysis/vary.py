"""The analysis of ``sbprof run --vary``: each variant's figures over its runs, its ratio to the base, the loss
check, the ranking and the winner.

Each run (a fresh ``sbprof run`` process) gives one figure of each kind from
its main stage's measured steps (``train`` when there is one, else the
first stage the base ran): the throughput (audio seconds, utterances, or
steps per second of the loop: summed units over the summed loop time, data
wait and the time between steps included, so that a change in data loading
shows), the median step time, the data-wait share of the loop, the peak
memory, and the CPU cost (process CPU seconds per audio second, per
utterance or per step). A variant's figure is the median over its runs with
the distribution-free interval of :func:`~sbprof.analysis.intervals.interval_over_runs`;
its ratio to the base is the gate's run-level statistic
(:func:`~sbprof.analysis.verdict.compare_runs`: Hodges-Lehmann ratio with the
exact Mann-Whitney interval), and a ratio whose interval includes 1 is "no
change the runs can show".

The loss check: the losses of a variant's first steps (its first run that
recorded any) against the base's, step by step; the largest relative
difference must stay within the tolerance, and every loss must be finite.
A variant that changes the script's own arguments (a batch size) sees other
batches, so its losses are not compared, and the report says so. A
variant that fails the check is flagged and never ranked; the winner is the
ranked variant with the highest throughput ratio whose interval lies above 1.

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
}
"""Each figure: its name for people, and whether lower is better."""
THROUGHPUTS = ("audio_per_s", "utterances_per_s", "steps_per_s")


def loss_change(base: Sequence[Optional[float]], variant: Sequence[Optional[float]]) -> float:
    """The largest relative difference of ``variant``'s losses from ``base``'s over the steps both took
    (``inf`` when a loss is not finite: ``None`` in the results)."""
    worst = 0.0
    for b, v in zip(base, variant):
        if b is None or v is None or not (math.isfinite(b) and math.isfinite(v)):
            return math.inf
        worst = max(worst, abs(v - b) / max(abs(b), 1e-12))
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
    if m.cpu_s and len(m.cpu_s) == len(steps):
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


def _stage(records: List[Measurement], base: str) -> str:
    stages = [m.cell.variant for m in records if m.ok and m.cell.params.get("variant") == base]
    return "train" if "train" in stages else (stages[0] if stages else "train")


def _variant(name: str, changes: List[Tuple[str, Any]], records: List[Measurement], stage: str,
             base_runs: Dict[str, List[float]], base_losses: Optional[List[float]], tolerance: float) -> VariantResult:
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
        base = base_runs.get(key, [])
        level = ratio_level(min(len(base), len(values)))
        if level is not None and min(base) > 0 and min(values) > 0:
            figure.ratio = compare_runs([[b] for b in base], [[v] for v in values], threshold=0.0,
                                        confidence=level, lower_is_better=lower_is_better)
        result.figures[key] = figure
    losses = next((run_payload(m).losses for m in sorted(mine, key=lambda m: m.cell.run)
                   if m.ok and run_payload(m).losses), None)
    if base_losses is None:  # its own arguments (a batch size...) give it other batches: no step-by-step check
        result.loss_compared = False
    elif losses and base_losses:
        result.loss_steps = min(len(losses), len(base_losses))
        result.loss_change = loss_change(base_losses, losses)
        result.loss_ok = result.loss_change <= tolerance
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
    stage = _stage(records, base)
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
                          base_runs if i else {}, (base_losses if same_batches else None) if i else [], tolerance)
        out.append(result)
    throughput = next((k for k in THROUGHPUTS if k in base_runs), "steps_per_s")
    report = VaryReport(script=str(rules.get("script") or rules.get("module")), stage=stage, throughput=throughput,
                        rounds=int(rules.get("rounds", 0)), loss_tolerance=tolerance, variants=out,
                        notes=list(results.notes))
    ranked = [r for r in out[1:] if r.measured and r.loss_ok and throughput in r.figures
              and r.figures[throughput].ratio is not None]
    ranked.sort(key=lambda r: -r.figures[throughput].ratio.ratio)
    report.ranking = [r.name for r in ranked]
    faster = [r for r in ranked if r.figures[throughput].ratio.low > 1]
    report.winner = faster[0].name if faster else None
    return report
