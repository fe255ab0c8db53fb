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

from sbprof.analysis.intervals import RunsSummary, SpreadPrior, summarise_runs
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


def worker_group(m: Measurement) -> Tuple[str, str, str, int]:
    """The cells that share worker processes: one model (and variant) on one setting."""
    return m.cell.model, m.cell.variant or "", m.cell.device, m.cell.threads


def spread_priors(records: Sequence[Measurement]) -> Dict[Tuple[str, str, str, int], Optional[SpreadPrior]]:
    """Per :func:`worker_group`, the spread between runs pooled over its cells (what adaptive repeats used)."""
    cells: Dict[Tuple[str, str, str, int], List[List[float]]] = {}
    for runs in group_runs(records).values():
        cells.setdefault(worker_group(runs[0]), []).append([run_figure(m) for m in runs if m.ok and m.wall_s])
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
