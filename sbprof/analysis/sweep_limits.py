"""What limits a sweep: real time, memory, threads and the length-quadratic term, from its typed summary.

Per setting (device, threads): up to which cell it stays real-time (RTF < 1,
measured cells with their interval, predicted ones marked), the cell that ran
out of memory beside the largest that fitted, and whether the cost model's
``B*L^2`` term passes half of the length-dependent cost within the measured
lengths; per device, the parallel efficiency of each doubling of threads on
the cells measured at every thread count. A verdict whose cells differ by less
than the setting's noise floor, or from a cost model that misses its
held-out cells, is withheld and the reason given
(:mod:`sbprof.analysis.limits`). On an oversubscribed setting the measured
times are upper bounds: an RTF below 1 still proves real-time
(:func:`upper_bounds`), while a verdict that needs the true value (not
real-time, length-quadratic, threads) is withheld, and says so. Pure: no
torch, no clocks.

Example
-------
>>> tm = fit_time_model({(a, b): (0.001 + 0.004 * b * a + 0.002 * b * a * a) / (a * b)
...                      for a in (0.5, 1, 2, 4) for b in (1, 2)})
>>> round(tm.coefficient("B*L"), 6), round(tm.coefficient("B*L^2"), 6), round(tm.crossing_s, 6)
(0.004, 0.002, 2.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sbprof.analysis.costmodel import TERMS as COST_TERMS
from sbprof.analysis.costmodel import CostPoint, calibrate, fit_cost_model
from sbprof.analysis.limits import (THRESHOLDS, Figure, Limits, Verdict, length_quadratic, limits, noise,
                                    quadratic_crossing, threads)
from sbprof.analysis.lsq import t_quantile
from sbprof.analysis.predictions import TERMS
from sbprof.base.errors import ConfigError

# The sweep's cells, settings and models (:mod:`sbprof.analysis.sweep`, which imports this module) come in typed
# as Any: importing their classes here would close an import cycle.
SweepCell = SweepSetting = SweepModel = Any
GridKey = Tuple[float, int]
LINEAR = ("L", "B*L")
"""The cost model's terms linear in length: at batch 1 both are one utterance's linear cost."""


@dataclass(frozen=True)
class TimeModel:
    """A setting's time per batch fitted on its measured cells (:mod:`sbprof.analysis.costmodel`).

    ``coefficients`` (s) per term with their 95 % intervals (``low``,
    ``high``); ``held_out_error``: the root mean square relative error of the
    cells predicted without themselves (``None`` with too few checks);
    ``crossing_s``: where the ``B*L^2`` term passes the linear ones for one
    utterance, with its interval (``None`` without a quadratic term).
    """

    terms: Tuple[str, ...]
    coefficients: Tuple[float, ...]
    low: Tuple[float, ...]
    high: Tuple[float, ...]
    formula: str
    held_out_error: Optional[float]
    checks: int
    crossing_s: Optional[float] = None
    crossing_low: Optional[float] = None
    crossing_high: Optional[float] = None

    def coefficient(self, term: str) -> float:
        return self.coefficients[self.terms.index(term)] if term in self.terms else 0.0

    def interval(self, term: str) -> Tuple[float, float]:
        i = self.terms.index(term)
        return self.low[i], self.high[i]


def fit_time_model(rtfs: Dict[GridKey, float], confidence: float = 0.95) -> Optional[TimeModel]:
    """The cost model of time per batch on cells ``(seconds, batch) -> RTF``; ``None`` when it cannot be fitted."""
    points = [CostPoint(b, a, rtf * a * b) for (a, b), rtf in sorted(rtfs.items()) if rtf > 0]
    try:
        model = fit_cost_model(points, TERMS)
    except ConfigError:
        return None
    fit = model.fit
    ok = fit.dof >= 1 and math.isfinite(fit.sigma)
    intervals = [fit.coefficient_interval(i, confidence) if ok else (math.nan, math.nan)
                 for i in range(len(model.terms))]
    calibration = calibrate(points, TERMS)
    linear = sum(model.coefficient(t) for t in LINEAR)
    quadratic = model.coefficient("B*L^2")
    crossing = quadratic_crossing(linear, quadratic)
    low = high = None
    if crossing is not None and ok:  # delta method on linear / quadratic, from the coefficients' covariance
        grad = np.array([1 / quadratic if t in LINEAR else -linear / quadratic ** 2 if t == "B*L^2" else 0.0
                         for t in model.terms])
        se = fit.sigma * math.sqrt(max(float(grad @ np.asarray(fit.unscaled_cov) @ grad), 0.0))
        half = t_quantile(confidence, fit.dof) * se
        low, high = crossing - half, crossing + half
    return TimeModel(terms=model.terms, coefficients=tuple(model.coefficients),
                     low=tuple(lo for lo, _ in intervals), high=tuple(hi for _, hi in intervals),
                     formula=model.formula(), held_out_error=None if calibration is None else calibration.scale,
                     checks=0 if calibration is None else calibration.count, crossing_s=crossing,
                     crossing_low=low, crossing_high=high)


def cell_rtf(cell: SweepCell) -> Optional[Tuple[float, Optional[float], Optional[float], bool]]:
    """A cell's RTF ``(median, low, high, predicted)``: measured with its interval, else its numbered prediction."""
    if cell.over_runs is not None:
        i = cell.over_runs.interval
        return i.median, i.low, i.high, False
    if cell.one_run is not None:
        return cell.one_run.median, cell.one_run.q1, cell.one_run.q3, False
    p = cell.predicted.get("rtf")
    if p is not None and p.value is not None:
        return p.value, p.low, p.high, True
    return None


def _name(key: GridKey) -> str:
    return f"{key[0]:g} s x batch {key[1]}"


def _size(key: GridKey) -> Tuple[float, float]:
    return key[0] * key[1], key[0]


def _label(s: SweepSetting, model: str) -> str:
    return f"{model}{s.device}, {s.threads} thread{'s' if s.threads != 1 else ''}"


def _rtf_figure(key: GridKey, rtf: Tuple[float, Optional[float], Optional[float], bool]) -> Figure:
    return Figure(f"RTF at {_name(key)}" + (" (predicted)" if rtf[3] else ""), rtf[0], "", rtf[1], rtf[2])


def upper_bounds(s: SweepSetting, label: str) -> Tuple[Optional[Verdict], Optional[str]]:
    """Real time on an oversubscribed setting, whose measured RTFs are upper bounds: a bound below 1 proves
    real-time, one at or above 1 decides nothing. The cells below 1 before the first that is not (by seconds of
    audio in the batch) make the verdict; from that cell on, why it is not decided."""
    rtfs = {k: r for k, r in ((k, cell_rtf(c)) for k, c in s.cells.items() if c.runs) if r is not None}
    cells = sorted(rtfs, key=_size)
    first = next((k for k in cells if rtfs[k][0] >= THRESHOLDS["real-time"].value), None)
    fast = [k for k in cells if first is None or _size(k) < _size(first)]
    why = None if first is None else (
        f"{label}: real-time from {_name(first)} on not decided: its RTF ({rtfs[first][0]:.3g}), measured while the "
        "setting was oversubscribed, is an upper bound; the true value may lie below 1")
    if not fast:
        return None, why
    top, rtf = fast[-1], rtfs[fast[-1]]
    scope = "in every measured cell, up to" if first is None else "up to"
    return Verdict("real-time", f"{label} stays real-time {scope} {_name(top)} (RTF at most {rtf[0]:.3g}: measured "
                   "while the setting was oversubscribed, an upper bound).",
                   [Figure(f"RTF at {_name(top)} (upper bound)", rtf[0], "", rtf[1], rtf[2])],
                   THRESHOLDS["real-time"].text, f"a margin of at least {1 / rtf[0]:.3g}x: longer utterances or "
                   "larger batches stay real-time up to about that factor", weight=rtf[0]), why


def real_time(s: SweepSetting, label: str) -> Tuple[Optional[Verdict], Optional[str]]:
    """The first cell (by seconds of audio in the batch) at or above RTF 1, or else the largest real-time one; or
    why not, when that first cell's RTF is within the noise floor of 1. On an oversubscribed setting,
    :func:`upper_bounds`."""
    if s.oversubscribed:
        return upper_bounds(s, label)
    rtfs = {k: r for k, r in ((k, cell_rtf(c)) for k, c in s.cells.items()) if r is not None}
    if not rtfs:
        return None, None
    slow = sorted((k for k, r in rtfs.items() if r[0] >= THRESHOLDS["real-time"].value), key=_size)
    fast = sorted((k for k, r in rtfs.items() if r[0] < THRESHOLDS["real-time"].value), key=_size)
    if not slow:
        top = fast[-1]
        rtf = rtfs[top]
        kinds = "measured or predicted" if any(r[3] for r in rtfs.values()) else "measured"
        return Verdict("real-time", f"{label} stays real-time in every {kinds} cell, up to {_name(top)} (RTF "
                       f"{rtf[0]:.3g}{', predicted' if rtf[3] else ''}).", [_rtf_figure(top, rtf)],
                       THRESHOLDS["real-time"].text, f"a margin of {1 / rtf[0]:.3g}x: longer utterances or larger "
                       "batches stay real-time up to about that factor", weight=rtf[0]), None
    first = slow[0]
    rtf = rtfs[first]
    why = noise(s.noise.run_cv, [rtf[0] - 1], f"the RTF at {_name(first)} and 1") if s.noise else None
    if why is not None:
        return None, f"{label}: real-time undecided: {why}"
    below = [k for k in fast if _size(k) < _size(first)]
    straddles = rtf[1] is not None and rtf[1] < THRESHOLDS["real-time"].value
    sentence = (f"{label} is not real-time from {_name(first)} (RTF {rtf[0]:.3g}"
                f"{', predicted' if rtf[3] else ''}{'; its interval reaches below 1' if straddles else ''})")
    sentence += f"; the largest real-time cell is {_name(below[-1])}." if below else "."
    return Verdict("real-time", sentence, [_rtf_figure(first, rtf)] + ([_rtf_figure(below[-1], rtfs[below[-1]])]
                                                                     if below else []),
                   THRESHOLDS["real-time"].text, "shorter segments or smaller batches, more threads or a GPU, "
                   "or a lighter model", weight=1.0), None


def memory(s: SweepSetting, label: str) -> Optional[Verdict]:
    """The cell that ran out of memory (the smallest, when several), beside the largest that fitted."""
    ooms = sorted((k for k, c in s.cells.items() if c.status == "oom"), key=_size)
    if not ooms:
        return None
    peaks = {k: c.peak_bytes for k, c in s.cells.items() if c.runs and c.peak_bytes}
    fits = {k: (v, False) for k, v in peaks.items()}
    if peaks:  # a predicted peak no higher than a measured one that fitted fits too
        fits.update({k: (c.predicted["peak_memory_bytes"].value, True) for k, c in s.cells.items()
                     if not c.runs and c.status != "oom" and "peak_memory_bytes" in c.predicted
                     and c.predicted["peak_memory_bytes"].high is not None
                     and c.predicted["peak_memory_bytes"].high <= max(peaks.values())})
    figures = []
    sentence = f"{label} ran out of memory at {', '.join(_name(k) for k in ooms)}"
    if fits:
        top = max(fits, key=_size)
        peak, predicted = fits[top]
        sentence += (f"; the largest cell that fits is {_name(top)} (peak {peak / 1e9:.3g} GB"
                     f"{', predicted' if predicted else ''})")
        figures.append(Figure(f"peak at {_name(top)}" + (" (predicted)" if predicted else ""), peak / 1e9, "GB"))
    wanted = s.cells[ooms[0]].predicted.get("peak_memory_bytes")
    if wanted is not None and wanted.value is not None:
        figures.append(Figure(f"peak needed at {_name(ooms[0])} (predicted)", wanted.value / 1e9, "GB",
                              wanted.low / 1e9, wanted.high / 1e9))
    return Verdict("memory", sentence + ".", figures, THRESHOLDS["memory"].text, "smaller batches or shorter "
                   "segments, half precision, or a device with more memory", weight=1.0)


def quadratic(s: SweepSetting, label: str) -> Tuple[Optional[Verdict], Optional[str]]:
    """The length-quadratic verdict of a setting's time model, or why it cannot be decided."""
    tm = s.time_model
    measured = [k for k, c in s.cells.items() if c.runs]
    longest_s = max(k[0] for k in measured) if measured else 0.0
    if tm is None or tm.crossing_s is None or tm.crossing_s > longest_s:
        return None, None
    why = f"{label}: length-quadratic undecided: "
    if tm.held_out_error is None:
        return None, why + "too few measured cells to check the cost model on cells it was not fitted on"
    if tm.held_out_error > THRESHOLDS["fit"].value:
        return None, why + (f"the cost model misses the cells it was not fitted on by {tm.held_out_error * 100:.0f} "
                            f"% (root mean square), over {THRESHOLDS['fit'].value * 100:.0f} %")
    low = tm.interval("B*L^2")[0]
    if not low > 0:
        return None, why + "the B*L^2 coefficient's 95 % interval reaches zero"
    largest = max(measured, key=_size)  # what the quadratic term adds there, against the cell's whole time
    term = tm.coefficient("B*L^2") * largest[1] * largest[0] ** 2
    total = sum(c * COST_TERMS[t](largest[1], largest[0]) for t, c in zip(tm.terms, tm.coefficients))
    hidden = noise(s.noise.run_cv, [term / total], f"with and without the B*L^2 term, the cells at {_name(largest)}"
                   ) if s.noise and total > 0 else None
    if hidden is not None:
        return None, why + hidden
    linear = sum(tm.coefficient(t) for t in LINEAR)
    v = length_quadratic(linear, tm.coefficient("B*L^2"), longest_s)
    crossing = replace(v.figures[0], low=tm.crossing_low, high=tm.crossing_high)
    return replace(v, sentence=f"{label}: {v.sentence[0].lower()}{v.sentence[1:]}",
                   figures=[crossing, *v.figures[1:],
                            Figure("linear cost per utterance-second", linear, "s"),
                            Figure("quadratic cost per utterance-second squared", tm.coefficient("B*L^2"), "s",
                                   *tm.interval("B*L^2")),
                            Figure("held-out error of the cost model", tm.held_out_error, "share")]), None


def _threads(settings: Sequence[SweepSetting], label: str) -> Tuple[Optional[Verdict], Optional[str]]:
    """Parallel efficiency per doubling of threads on one device, on the cells measured at every count."""
    by_count = {s.threads: s for s in settings}
    if any(s.oversubscribed for s in settings):
        return None, f"threads on {label}: a setting is oversubscribed, its times are upper bounds"
    rtfs = {n: {k: r for k, r in ((k, cell_rtf(c)) for k, c in s.cells.items() if c.runs) if r is not None}
            for n, s in by_count.items()}
    common = sorted(set.intersection(*(set(r) for r in rtfs.values())), key=_size)
    if not common:
        return None, f"threads on {label}: no cell was measured at every thread count"
    counts = sorted(by_count)
    for few, many in zip(counts, counts[1:]):
        floors = [s.noise.run_cv for s in (by_count[few], by_count[many]) if s.noise is not None]
        why = noise(max(floors), [rtfs[few][k][0] / rtfs[many][k][0] - 1 for k in common],
                    f"the {len(common)} cells at {few} and {many} threads") if floors else None
        if why is not None:
            return None, f"threads on {label}: {why}"
    # geometric mean over the matched cells of each one's median time per batch
    times = {n: math.exp(sum(math.log(rtfs[n][k][0] * k[0] * k[1]) for k in common) / len(common)) for n in counts}
    v = threads(times)
    return (None if v is None else replace(v, sentence=f"{label}: {v.sentence[0].lower()}{v.sentence[1:]} "
                                           f"(geometric mean of {len(common)} matched cells)")), None


def sweep_limits(models: Sequence[SweepModel]) -> Limits:
    """Every sweep rule over every model and setting, most important first (see the module docstring)."""
    candidates: List[Optional[Verdict]] = []
    undecided: List[str] = []
    for model in models:
        prefix = f"{model.name}: " if len(models) > 1 else ""
        by_device: Dict[str, List[SweepSetting]] = {}
        for s in model.settings:
            label = _label(s, prefix)
            by_device.setdefault(s.device, []).append(s)
            candidates.append(memory(s, label))
            v, why = real_time(s, label)
            candidates.append(v)
            undecided += [why] if why else []
            if s.oversubscribed:  # a verdict that needs the true times (length-quadratic) is not even computed
                undecided.append(f"{label}: oversubscribed, its times are upper bounds: only an RTF below 1 decides; "
                                 "no verdict that needs the true times")
                continue
            v, why = quadratic(s, label)
            candidates.append(v)
            undecided += [why] if why else []
        for device, settings in by_device.items():
            if len(settings) > 1:
                v, why = _threads(settings, f"{prefix}{device}")
                candidates.append(v)
                undecided += [why] if why else []
    return limits(candidates, undecided)
