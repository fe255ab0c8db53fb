"""A comparison's records as series: per variant, per point of the varied dimension, the figures a reader compares.

Pure functions of a :class:`~sbprof.record.Results` (one machine's, one
setting's): the analyses of comparisons and of merged machines build them
here, once, and the renderers format them, so every output states the same
numbers.

Per point, with the runs (fresh processes) of that point:

- latency: the median over runs of each run's median call time (one run:
  its median), the quartiles of all runs' calls pooled (the band a plot
  draws), and the smallest and largest run median;
- RTFx: seconds of audio per call / that median latency;
- memory: the median over runs of the memory one call adds, and of the peak;
- energy: per domain, the median over runs of joules per call and of watts,
  or "not measurable here" with the reasons.

Growth law per variant: fitted on (size, run median) pairs with
:func:`sbprof.analysis.growth.choose_growth_law` (every form, the one with the
lowest leave-one-out error chosen), and the power form ``t = a n^b`` beside
it for its exponent ``b`` with a 95% interval.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.growth import GrowthChoice, GrowthFit, choose_growth_law, crossovers, fit_growth_form
from sbprof.base.errors import ConfigError
from sbprof.analysis.figures import Outcome, batch_memory_gb, peak_gb, setting_sort_key
from sbprof.record import Energy, Measurement
from sbprof.record.results import Results
from sbprof.base.stats import summarise

VARIED = {
    "audio_s": "seconds of audio per utterance",
    "frames": "frames per utterance",
    "batch_size": "utterances per batch",
}
"""The dimension a comparison varies, and how an axis names it."""


def x_value(m: Measurement, vary: str) -> float:
    """The varied coordinate of a record.

    Example
    -------
    >>> from sbprof.record import Cell
    >>> x_value(Measurement(label="p", cell=Cell(audio_s=0.5, params={"frames": 50})), "frames")
    50.0
    """
    if vary == "frames":
        return float(m.cell.params["frames"])
    return float(m.cell.batch_size if vary == "batch_size" else m.cell.audio_s)


@dataclass(frozen=True)
class PointEnergy:
    """Energy of a point: per domain, joules per call and average watts (medians over runs)."""

    joules_per_call: Dict[str, float]
    watts: Dict[str, float]
    unavailable: Dict[str, str]

    @property
    def measurable(self) -> bool:
        return bool(self.joules_per_call)

    def describe(self) -> str:
        """``cpu:package-0 0.512 J (44.1 W)`` per domain, or ``not measurable here (...)``."""
        if not self.measurable:
            reasons = "; ".join(f"{src}: {why}" for src, why in self.unavailable.items())
            return f"not measurable here ({reasons})" if reasons else "not measurable here"
        return ", ".join(f"{d} {j:.3g} J ({self.watts.get(d, float('nan')):.3g} W)"
                         for d, j in self.joules_per_call.items())


def point_energy(energies: Sequence[Energy]) -> Optional[PointEnergy]:
    """Medians over runs of each domain's joules per call and watts.

    Example
    -------
    >>> runs = [Energy(1.0, 0.0, 1.0, {"gpu:0": 10.0}, calls=10), Energy(2.0, 0.0, 2.0, {"gpu:0": 30.0}, calls=10)]
    >>> e = point_energy(runs)
    >>> e.joules_per_call, e.watts, e.describe()
    ({'gpu:0': 2.0}, {'gpu:0': 12.5}, 'gpu:0 2 J (12.5 W)')
    """
    if not energies:
        return None
    domains = sorted({d for e in energies for d in e.joules})
    per_call = {d: statistics.median(e.per_call()[d] for e in energies if d in e.joules) for d in domains}
    watts = {d: statistics.median(e.watts()[d] for e in energies if d in e.joules and e.duration_s > 0)
             for d in domains if any(d in e.joules and e.duration_s > 0 for e in energies)}
    return PointEnergy(joules_per_call=per_call, watts=watts, unavailable=dict(energies[0].unavailable))


@dataclass(frozen=True)
class Point:
    """One point of one variant (see the module docstring); times in seconds, memory in GB."""

    x: float
    runs: int
    median_s: float
    q1_s: float
    q3_s: float
    run_min_s: float
    run_max_s: float
    samples: int
    rtfx: Optional[float]
    batch_memory_gb: Optional[float]
    peak_memory_gb: Optional[float]
    energy: Optional[PointEnergy]


def _median_of(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise_point(x: float, records: Sequence[Measurement]) -> Point:
    """The figures of one point from its ok records (one per run)."""
    run_medians = [summarise(m.wall_s).median for m in records]
    pooled = summarise([s for m in records for s in m.wall_s])
    median = statistics.median(run_medians)
    audio = records[0].audio_seconds
    return Point(
        x=x, runs=len(records), median_s=median, q1_s=pooled.q1, q3_s=pooled.q3, run_min_s=min(run_medians),
        run_max_s=max(run_medians), samples=pooled.count, rtfx=audio / median if audio and median > 0 else None,
        batch_memory_gb=_median_of([batch_memory_gb(m) for m in records]),
        peak_memory_gb=_median_of([peak_gb(m) for m in records]),
        energy=point_energy([m.energy for m in records if m.energy is not None]),
    )


@dataclass(frozen=True)
class Series:
    """One variant's points, its parameter count and its growth law (``None`` with ``growth_note`` when unfit)."""

    variant: str
    model: str
    params: Optional[int]
    points: Tuple[Point, ...]
    failures: Tuple[Tuple[float, Outcome], ...]
    growth: Optional[GrowthChoice]
    power: Optional[GrowthFit]
    growth_note: str = ""


def _fit(runs: Dict[float, List[float]]) -> Tuple[Optional[GrowthChoice], Optional[GrowthFit], str]:
    """Growth laws on (size, run median) pairs, and what stopped a fit."""
    n = [x for x in sorted(runs) for _ in runs[x]]
    t = [v for x in sorted(runs) for v in runs[x]]
    choice = power = None
    notes = []
    try:
        choice = choose_growth_law(n, t)
    except ConfigError as exc:
        notes.append(str(exc))
    try:
        power = fit_growth_form("power", n, t)
    except ConfigError as exc:
        notes.append(str(exc))
    return choice, power, "; ".join(notes)


def variant_order(results: Results) -> List[str]:
    """Variants in the order the comparison listed them (then any others, sorted)."""
    named = [m.cell.variant or m.cell.model for m in results.records]
    listed = [v for v in results.models if v in named]
    return listed + sorted(set(named) - set(listed))


def settings_of(results: Results) -> List[Tuple[str, int]]:
    """The (device, threads) settings a comparison's records were measured on, CUDA first."""
    return sorted({m.cell.setting for m in results.records}, key=lambda s: setting_sort_key(*s))


def build_series(results: Results, setting: Optional[Tuple[str, int]] = None) -> List[Series]:
    """Every variant of a comparison's results (of one setting, or of all) as a :class:`Series`.

    Example
    -------
    >>> from sbprof.record import Cell
    >>> records = [Measurement(label="p", cell=Cell(variant="v", audio_s=n, run=r), wall_s=[0.01 * n * n],
    ...                        audio_seconds=n) for n in (1.0, 2.0, 4.0, 8.0) for r in (0, 1)]
    >>> s, = build_series(Results("compare", rules={"vary": "audio_s"}, records=records))
    >>> [p.x for p in s.points], s.points[0].runs, round(s.power.coefficients[1], 6)
    ([1.0, 2.0, 4.0, 8.0], 2, 2.0)
    """
    vary = results.rules.get("vary", "audio_s")
    out = []
    for variant in variant_order(results):
        records = [m for m in results.records if (m.cell.variant or m.cell.model) == variant
                   and (setting is None or m.cell.setting == setting)]
        if not records:
            continue
        by_x: Dict[float, List[Measurement]] = {}
        for m in records:
            by_x.setdefault(x_value(m, vary), []).append(m)
        points, failures, run_medians = [], [], {}
        for x in sorted(by_x):
            ok = [m for m in by_x[x] if m.ok and m.wall_s]
            if ok:
                points.append(summarise_point(x, ok))
                run_medians[x] = [summarise(m.wall_s).median for m in ok]
            else:
                failures.append((x, Outcome.of(by_x[x][0])))  # renderers say what went wrong
        params = next((m.counts.params for m in records if m.counts is not None and m.counts.params), None)
        choice, power, note = _fit(run_medians) if points else (None, None, "no point measured")
        out.append(Series(variant=variant, model=records[0].cell.model, params=params, points=tuple(points),
                          failures=tuple(failures), growth=choice, power=power, growth_note=note))
    return out


@dataclass(frozen=True)
class Crossover:
    """Where two variants' fitted laws cross inside the range both were measured over."""

    first: str
    second: str
    at: float
    faster_below: str
    faster_above: str


def find_crossovers(series: Sequence[Series]) -> List[Crossover]:
    """Crossings of every pair of fitted growth laws within their common measured range.

    Example
    -------
    >>> def series(name, t):
    ...     sizes = [1.0, 2.0, 4.0, 8.0]
    ...     pts = tuple(Point(x, 1, t(x), t(x), t(x), t(x), t(x), 1, None, None, None, None) for x in sizes)
    ...     return Series(name, name, None, pts, (), choose_growth_law(sizes, [t(x) for x in sizes]), None)
    >>> [(c.at, c.faster_below) for c in find_crossovers([series("lin", lambda x: 2 * x),
    ...                                                    series("quad", lambda x: x * x)])]
    [(2.0, 'quad')]
    """
    found = []
    fitted = [s for s in series if s.growth is not None]
    for i, a in enumerate(fitted):
        for b in fitted[i + 1:]:
            lo = max(a.growth.best.n_min, b.growth.best.n_min)
            hi = min(a.growth.best.n_max, b.growth.best.n_max)
            if not lo < hi:
                continue
            for at in crossovers(a.growth.best, b.growth.best, lo, hi):
                # Which is faster on each side: read just inside the range, away from the crossing.
                below = a.variant if a.growth.best.predict(lo) < b.growth.best.predict(lo) else b.variant
                above = a.variant if a.growth.best.predict(hi) < b.growth.best.predict(hi) else b.variant
                found.append(Crossover(first=a.variant, second=b.variant, at=round(at, 12), faster_below=below,
                                       faster_above=above))
    return found
