"""Predicted cells of a sweep: the heavy corner filled from a cost model fitted on the measured cells.

Per setting (device, threads) and figure, :mod:`sbprof.analysis.costmodel`
fits ``k0 + kL*L + k1*B*L + k2*B*L^2`` (B utterances of L seconds:
per-call overhead; work per step of an autoregressive decoder or beam
search, whose steps grow with length while the batch is processed in one
go; work linear in frames; attention's quadratic score maps) on the cells
measured successfully,
weighted in relative error (a term that comes out negative is dropped), and
predicts the
cells that were skipped or ran out of memory, each with an interval
calibrated on held-out cells, or, further out than those checks reach,
only a lower bound (:func:`sbprof.analysis.costmodel.predict`). On a CPU,
a cell whose predicted working set (the memory one batch adds) passes the
last-level cache, where no measured cell went, gets a bound for its time:
past the cache it runs at memory bandwidth, a regime the fit never saw.
Predictions are derived on read, like every statistic, and kept
apart from measured values in every output. Held-out validation refits on
the triangle alone and predicts a fully measured corner, to show how far
the predictions can be trusted. An oversubscribed setting's time is not
predicted: its measured times are upper bounds, and a fit on them bounds
nothing (its memory is, which load does not change).
:func:`shown_predictions` converts a cell's predictions into the units its
tables show (RTF, RTFx, bytes). Pure functions of records.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.costmodel import CostPoint, HeldOutReport, predict, validate_held_out
from sbprof.base.errors import ConfigError
from sbprof.analysis.grid import triangle_skipped
from sbprof.analysis.machine_load import crowded_settings
from sbprof.record import Measurement
from sbprof.record.codec import Codec
from sbprof.analysis.runs import group_runs, median_over_runs, representative, rtf_over_runs

TERMS = ("1", "L", "B*L", "B*L^2")
"""The cost model's terms (see the module docstring)."""

SettingKey = Tuple[str, int]
GridKey = Tuple[float, int]


def _time_s(runs: Sequence[Measurement]) -> Optional[float]:
    summary = rtf_over_runs(runs)
    rep = representative(runs)
    return None if summary is None else summary.interval.median * rep.audio_seconds


def _added(runs: Sequence[Measurement]) -> Optional[float]:
    on_cuda = representative(runs).cell.device.startswith("cuda")
    key = "peak_cuda_delta_bytes" if on_cuda else "peak_rss_delta_bytes"
    return median_over_runs(runs, lambda m: getattr(m.memory, key) if m.memory else None)


def _peak(runs: Sequence[Measurement]) -> Optional[float]:
    on_cuda = representative(runs).cell.device.startswith("cuda")
    key = "peak_cuda_bytes" if on_cuda else "peak_rss_bytes"
    return median_over_runs(runs, lambda m: getattr(m.memory, key) if m.memory else None)


FIGURES: Dict[str, Callable[[Sequence[Measurement]], Optional[float]]] = {
    "time_s": _time_s, "batch_memory_bytes": _added, "peak_memory_bytes": _peak}
"""What is predicted: seconds per batch (RTF = this / audio seconds), the memory a batch adds, the peak."""


@dataclass(frozen=True)
class CellPrediction(Codec):
    """One predicted figure of one unmeasured cell: ``value [low, high]``, or, when ``beyond`` says why, only
    the lower bound ``low`` (``None`` when no measured cell lies below)."""

    device: str
    threads: int
    audio_s: float
    batch_size: int
    figure: str
    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float
    why: str
    formula: str
    beyond: Optional[str] = None


@dataclass(frozen=True)
class ShownPrediction:
    """A predicted figure of a cell as its tables show it (RTF, RTFx or bytes): ``value [low, high]``; beyond the
    measured range (``beyond``), only the bound: ``low`` (at least, RTF and memory) or ``high`` (at most, RTFx).
    ``high`` is ``None`` for an RTFx whose time interval reaches zero (unbounded)."""

    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    beyond: bool = False


def shown_predictions(key: GridKey, predictions: Dict[str, CellPrediction]) -> Dict[str, ShownPrediction]:
    """The predictions of an unmeasured cell in its tables' units: time as RTF and RTFx, memory in bytes."""
    shown: Dict[str, ShownPrediction] = {}
    if not predictions:  # a cell outside any grid (no length, no batch size) is never predicted
        return shown
    audio = key[0] * key[1]
    p = predictions.get("time_s")
    if p is not None and p.beyond is not None:
        if p.low is not None:
            shown["rtf"] = ShownPrediction(None, p.low / audio, None, beyond=True)
        if p.low:  # a time bounded below is an RTFx bounded above
            shown["rtfx"] = ShownPrediction(None, None, audio / p.low, beyond=True)
    elif p is not None:
        shown["rtf"] = ShownPrediction(p.value / audio, p.low / audio, p.high / audio)
        if p.value > 0:
            shown["rtfx"] = ShownPrediction(audio / p.value, audio / p.high, audio / p.low if p.low > 0 else None)
    for figure in ("batch_memory_bytes", "peak_memory_bytes"):
        p = predictions.get(figure)
        if p is not None and p.beyond is not None:
            if p.low is not None:
                shown[figure] = ShownPrediction(None, p.low, None, beyond=True)
        elif p is not None:
            shown[figure] = ShownPrediction(p.value, p.low, p.high)
    return shown


def _by_setting(records: Sequence[Measurement]) -> Dict[SettingKey, Dict[GridKey, List[Measurement]]]:
    out: Dict[SettingKey, Dict[GridKey, List[Measurement]]] = {}
    for runs in group_runs(records).values():
        cell = runs[0].cell
        out.setdefault(cell.setting, {})[cell.grid_key] = runs
    return out


def _points(cells: Dict[GridKey, List[Measurement]], figure: str, keys: Sequence[GridKey]) -> List[CostPoint]:
    points = []
    for key in keys:
        value = FIGURES[figure](cells[key])
        if value is not None and value > 0:
            points.append(CostPoint(batch_size=key[1], seconds=key[0], value=value))
    return points


def _past_cache(cells: Dict[GridKey, List[Measurement]], fit_on: Sequence[GridKey],
                targets: Sequence[GridKey]) -> Dict[Tuple[float, float], str]:
    """Targets whose time must be a bound: predicted past the last-level cache when no fitted cell was (CPU)."""
    rep = representative(next(iter(cells.values())))
    llc = rep.env.llc_bytes if rep.env is not None else None
    if llc is None or rep.cell.device.startswith("cuda"):
        return {}
    points = _points(cells, "batch_memory_bytes", fit_on)
    if len(points) < 2 or max(p.value for p in points) > llc:
        return {}
    try:
        _, memory = predict(points, [(b, a) for a, b in targets], TERMS)
    except ConfigError:
        return {}
    return {(p.batch_size, p.seconds): f"its working set (~{p.value / 1e6:.0f} MB a batch adds, predicted) passes "
            f"the {llc / 2 ** 20:.0f} MiB last-level cache, which no measured cell's did"
            for p in memory if p.value is not None and p.value > llc}


def _figures(setting: SettingKey, crowded: Collection[SettingKey]) -> List[str]:
    """What is predicted for a setting: not its time when it was oversubscribed (its times are upper bounds, and
    a fit on upper bounds bounds nothing: intervals such as RTFx ~1364 [0.027, 68,224,460] were printed)."""
    return [f for f in FIGURES if not (f == "time_s" and setting in crowded)]


def predict_cells(records: Sequence[Measurement], confidence: float = 0.95) -> List[CellPrediction]:
    """Predictions for every skipped or out-of-memory cell, per setting and figure.

    A setting or figure with too few measured cells to fit is left without
    predictions (never a guess), and so is the time of an oversubscribed
    setting (:func:`~sbprof.analysis.machine_load.crowded_settings`).
    """
    out: List[CellPrediction] = []
    crowded = crowded_settings(records)
    for (device, threads), cells in _by_setting(records).items():
        measured = [k for k, runs in cells.items() if any(m.ok for m in runs)]
        wanted = {k: representative(runs).status for k, runs in sorted(cells.items())
                  if representative(runs).status in ("skipped", "oom")}
        if not wanted:
            continue
        cache = _past_cache(cells, measured, list(wanted))
        for figure in _figures((device, threads), crowded):
            try:
                model, predictions = predict(_points(cells, figure, measured), [(b, a) for a, b in wanted], TERMS,
                                             confidence, cache if figure == "time_s" else None)
            except ConfigError:
                continue  # too few cells, or cells that cannot separate the terms
            for p, status in zip(predictions, wanted.values()):
                out.append(CellPrediction(device, threads, p.seconds, int(p.batch_size), figure, p.value, p.low,
                                          p.high, confidence, "out of memory" if status == "oom" else "skipped",
                                          model.formula(), p.beyond))
    return out


def held_out_validation(records: Sequence[Measurement],
                        confidence: float = 0.95) -> Dict[Tuple[SettingKey, str], HeldOutReport]:
    """Per setting and figure: fit on the triangle cells alone, predict the measured corner.

    Only for settings whose whole grid was measured (a corner to hold out).
    The triangle is SpeechBrain's rule on the grid's lengths and batch sizes
    in increasing order. A grid still being measured (a length or batch size
    missing for some cell) gets none: its triangle would not be the grid's;
    nor the time of an oversubscribed setting.
    """
    out: Dict[Tuple[SettingKey, str], HeldOutReport] = {}
    crowded = crowded_settings(records)
    for setting, cells in _by_setting(records).items():
        lengths = sorted({k[0] for k in cells})
        batches = sorted({k[1] for k in cells})
        if (len(cells) < len(lengths) * len(batches)
                or not all(any(m.ok for m in runs) for runs in cells.values())):
            continue
        corner = [k for k in cells if triangle_skipped(lengths.index(k[0]), batches.index(k[1]),
                                                         len(lengths), len(batches))]
        triangle = [k for k in cells if k not in corner]
        if not corner:
            continue
        cache = _past_cache(cells, triangle, corner)
        for figure in _figures(setting, crowded):
            try:
                out[(setting, figure)] = validate_held_out(_points(cells, figure, triangle),
                                                           _points(cells, figure, corner), TERMS, confidence,
                                                           cache if figure == "time_s" else None)
            except ConfigError:
                continue
    return out
