"""A cell measured in several fresh processes: its runs grouped, its figures over runs, the noise floor.

On these machines the spread between processes is several times the spread
within one (``../shared`` measured a 10 % coefficient of variation between
processes against +-3 % batch quartiles within one), so a cell's uncertainty
is told by its runs, not by one run's batches. Pure functions of records.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.intervals import RunInterval, RunsSummary, SpreadPrior, summarise_runs
from sbprof.analysis.figures import batch_audio_seconds
from sbprof.record import Cell, Measurement

NOISE_WARNING_CV = 0.05
"""A spread between processes of the reference batch above this is flagged."""


def base_cell(cell: Cell) -> Tuple[Any, ...]:
    """A cell's identity without its run index: the runs of one cell share it."""
    return cell.key()[:7] + cell.key()[8:]


def group_runs(records: Sequence[Measurement]) -> Dict[Tuple[Any, ...], List[Measurement]]:
    """Records of the same cell across runs, each group in run order (all statuses).

    Example
    -------
    >>> rs = [Measurement(label="a", cell=Cell(model="m", run=r)) for r in (1, 0)]
    >>> [m.cell.run for m in next(iter(group_runs(rs).values()))]
    [0, 1]
    """
    groups: Dict[Tuple[Any, ...], List[Measurement]] = {}
    for m in records:
        groups.setdefault(base_cell(m.cell), []).append(m)
    return {k: sorted(v, key=lambda m: m.cell.run) for k, v in groups.items()}


def representative(runs: Sequence[Measurement]) -> Measurement:
    """The record that speaks for a cell in per-cell tables: its first successful run, else its first run."""
    return next((m for m in runs if m.ok), runs[0])


def run_figure(m: Measurement) -> float:
    """The figure a run is judged by for repeats: its median measured call (a cell's RTF is this / its audio)."""
    return statistics.median(m.wall_s)


def cpu_figure(m: Measurement) -> float:
    """A run's median call in CPU time of the worker's threads (its CPU cost is this / its audio)."""
    return statistics.median(m.cpu_s)


def has_cpu(m: Measurement) -> bool:
    """A successful CPU-device run that kept one CPU time per timed call (CUDA settings are judged on wall time)."""
    return m.ok and bool(m.wall_s) and len(m.cpu_s) == len(m.wall_s) and not m.cell.device.startswith("cuda")


def worker_group(m: Measurement) -> Tuple[str, str, str, int]:
    """The cells that share worker processes: one model (and variant) on one setting."""
    return m.cell.model, m.cell.variant or "", m.cell.device, m.cell.threads


def spread_priors(records: Sequence[Measurement], cpu: bool = False
                  ) -> Dict[Tuple[str, str, str, int], Optional[SpreadPrior]]:
    """Per :func:`worker_group`, the spread between runs pooled over its cells (what adaptive repeats used); of
    the CPU-time figures with ``cpu``."""
    cells: Dict[Tuple[str, str, str, int], List[List[float]]] = {}
    for runs in group_runs(records).values():
        cells.setdefault(worker_group(runs[0]), []).append(
            [cpu_figure(m) for m in runs if has_cpu(m)] if cpu else [run_figure(m) for m in runs if m.ok and m.wall_s])
    return {group: SpreadPrior.pooled(figures) for group, figures in cells.items()}


def rtf_over_runs(runs: Sequence[Measurement], confidence: float = 0.95,
                  prior: Optional[SpreadPrior] = None) -> Optional[RunsSummary]:
    """The RTF of a cell over its successful runs: median over runs, its interval, the within-run spread.

    ``prior``: the spread of its worker group (:func:`spread_priors`), which the cell's own is moderated toward.
    """
    ok = [m for m in runs if m.ok and m.wall_s]
    if not ok:
        return None
    return summarise_runs([[w / batch_audio_seconds(m) for w in m.wall_s] for m in ok], confidence, prior)


def cpu_cost_over_runs(runs: Sequence[Measurement], confidence: float = 0.95,
                       prior: Optional[SpreadPrior] = None) -> Optional[RunsSummary]:
    """The CPU cost of a cell over its runs, summarised exactly as :func:`rtf_over_runs` summarises its RTF: each
    call's CPU time of the worker's threads / its audio seconds (core-seconds per audio second). ``None`` when a
    successful run kept no CPU times, or on CUDA.

    Example
    -------
    >>> rs = [Measurement(label="c", cell=Cell(run=r), wall_s=[2.0, 2.0], cpu_s=[c, c], audio_seconds=10.0)
    ...       for r, c in enumerate([1.0, 1.1, 0.9])]
    >>> cpu_cost_over_runs(rs).interval.median
    0.1
    """
    ok = [m for m in runs if m.ok and m.wall_s]
    if not ok or not all(has_cpu(m) for m in ok):
        return None
    return summarise_runs([[c / batch_audio_seconds(m) for c in m.cpu_s] for m in ok], confidence, prior)


LOAD_EXPLAINS = 0.5
"""Others' mean load (runnable processes beside the worker) from which it may explain a cell's wall-time spread."""


def others_load(runs: Sequence[Measurement]) -> Optional[float]:
    """Cores other processes kept busy over a cell's timed windows (their CPU time summed, then divided by the
    windows summed: one window is a few ticks); ``None`` when no run read it."""
    timed = [m for m in runs if m.ok and m.extra.get("window_s")]
    if not timed:
        return None
    return sum(m.extra.get("others_cpu_s", 0.0) for m in timed) / sum(m.extra["window_s"] for m in timed)


def load_explains(load: Optional[float], wall: Optional[RunInterval], cpu: Optional[RunInterval]) -> bool:
    """Whether precision is judged on CPU time: others' load beside the run was at least :data:`LOAD_EXPLAINS`
    runnable processes AND the CPU-time interval is narrower (relative half-width) than the wall-time one, so
    the wall-time spread is the waiting for a core, not the model's work.

    Example
    -------
    >>> w = RunInterval(1.0, 0.8, 1.2, 0.95, 0.8, 1.2, 0.9, 4)
    >>> c = RunInterval(1.0, 0.97, 1.03, 0.95, 0.97, 1.03, 0.9, 4)
    >>> load_explains(1.3, w, c), load_explains(0.2, w, c), load_explains(1.3, c, w)
    (True, False, False)
    """
    return (wall is not None and cpu is not None and cpu.confidence > 0
            and load_explains_widths(load, wall.half_width_rel, cpu.half_width_rel))


def load_explains_widths(load: Optional[float], wall_width: float, cpu_width: float) -> bool:
    """:func:`load_explains` on two relative widths (of intervals, or of a gate's ratio intervals).

    Example
    -------
    >>> load_explains_widths(1.0, 0.3, 0.05), load_explains_widths(None, 0.3, 0.05)
    (True, False)
    """
    return load is not None and load >= LOAD_EXPLAINS and cpu_width < wall_width


def median_over_runs(runs: Sequence[Measurement], value: Any) -> Optional[float]:
    """The median over successful runs of ``value(record)`` (skipping runs where it is ``None``)."""
    values = [v for v in (value(m) for m in runs if m.ok) if v is not None]
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class NoiseFloor:
    """The reference batch timed at the start and end of every worker process of a setting: the run's noise floor.

    ``run_cv``: spread between processes (standard deviation of the
    logarithm of each process's reference figure, the geometric mean of its
    start and end medians; ~ the coefficient of variation). ``drift_rel``:
    median over processes of ``|log(end / start)|``, how far the machine moved
    while one process measured its cells. ``median_s``: the reference's time.
    """

    runs: int
    run_cv: float
    drift_rel: Optional[float]
    median_s: float
    reference: str

    @property
    def high(self) -> bool:
        return self.run_cv > NOISE_WARNING_CV

    def describe(self) -> str:
        drift = (f", and moved by {100 * self.drift_rel:.1f} % (median) from the start to the end of one process"
                 if self.drift_rel is not None else "")
        text = (f"the reference batch ({self.reference}, {1000 * self.median_s:.1f} ms), timed first and last in each "
                f"of the {self.runs} worker processes, varied by {100 * self.run_cv:.1f} % between processes{drift}.")
        if self.high:
            text += (f" **Above {100 * NOISE_WARNING_CV:.0f} %: differences smaller than that between cells or "
                     "runs are not distinguishable from this machine's noise.**")
        return text


def noise_floor(references: Sequence[Measurement]) -> Optional[NoiseFloor]:
    """The noise floor of one setting from its reference records (``extra.reference`` start or end, ``cell.run``
    numbering the process), or ``None`` with fewer than two processes.

    Example
    -------
    >>> recs = [Measurement(label="r", cell=Cell(run=i // 2, audio_s=1, batch_size=1), wall_s=[t, t],
    ...                     extra={"reference": ("start", "end")[i % 2]})
    ...         for i, t in enumerate([0.010, 0.010, 0.011, 0.011])]
    >>> f = noise_floor(recs)
    >>> round(f.run_cv, 3), f.drift_rel, f.reference
    (0.067, 0.0, '1 s x 1')
    """
    per_process: Dict[int, Dict[str, float]] = {}
    for m in references:
        if m.ok and m.wall_s and min(m.wall_s) > 0:
            per_process.setdefault(m.cell.run, {})[m.extra.get("reference", "start")] = statistics.median(m.wall_s)
    if len(per_process) < 2:
        return None
    figures = [math.exp(statistics.fmean(math.log(v) for v in p.values())) for p in per_process.values()]
    drifts = [abs(math.log(p["end"] / p["start"])) for p in per_process.values() if len(p) == 2]
    cell = next(m.cell for m in references)
    return NoiseFloor(runs=len(figures), run_cv=statistics.stdev(math.log(f) for f in figures),
                      drift_rel=statistics.median(drifts) if drifts else None,
                      median_s=statistics.median(figures), reference=f"{cell.audio_s:g} s x {cell.batch_size}")
