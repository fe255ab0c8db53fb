"""A comparison's results analysed once: per setting, each variant's series, its growth law and the crossings.

:func:`analyse` builds everything a comparison's markdown, CSV
and plots show (:mod:`sbprof.analysis.series` per setting, the crossovers of
the fitted laws, the energy line, each record's derived figures); the
renderers (:mod:`sbprof.report.compare_models`) only format the
:class:`ComparisonSummary`. Pure: no torch, no clocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.cell_rows import CellRow, record_row
from sbprof.analysis.intervals import RunsSummary
from sbprof.analysis.runs import cpu_cost_over_runs, spread_priors, worker_group
from sbprof.analysis.series import Crossover, Series, build_series, find_crossovers, settings_of, x_value
from sbprof.record import Measurement
from sbprof.record.cell import setting_name
from sbprof.analysis.machine_facts import MachineFacts, results_facts
from sbprof.analysis.figures import cell_figures, cell_sort_key
from sbprof.analysis.limits import THRESHOLDS, Figure, Limits, Verdict, limits
from sbprof.record.results import Results


@dataclass(frozen=True)
class CompareSetting:
    """One (device, threads) of a comparison: the variants' series there and where their laws cross."""

    device: str
    threads: int
    series: List[Series]
    crossovers: List[Crossover]
    cpu_costs: Dict[Tuple[str, float], RunsSummary] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Filesystem-safe, e.g. ``cpu-1threads`` (the plots' file names)."""
        return setting_name(self.device, self.threads)

    def cpu_cost(self, variant: str, x: float) -> Optional[RunsSummary]:
        """A point's CPU cost over its runs (core-seconds per audio second), ``None`` on CUDA or without CPU times."""
        return self.cpu_costs.get((variant, x))


def cpu_costs(results: Results, setting: Tuple[str, int]) -> Dict[Tuple[str, float], RunsSummary]:
    """Per (variant, point) of one setting, the CPU cost over runs, summarised as a sweep cell's
    (:func:`~sbprof.analysis.runs.cpu_cost_over_runs`, the interval over runs, each run's spread pooled toward
    the variant's other points); absent on CUDA.

    Example
    -------
    >>> from sbprof.record import Cell, Measurement
    >>> rs = [Measurement(label="p", cell=Cell(variant="v", audio_s=2.0, run=r), wall_s=[0.5], cpu_s=[0.4],
    ...                   audio_seconds=2.0) for r in (0, 1)]
    >>> cpu_costs(Results("compare", rules={"vary": "audio_s"}, records=rs), ("cpu", 1))[("v", 2.0)].interval.median
    0.2
    """
    vary = results.rules.get("vary", "audio_s")
    points: Dict[Tuple[str, float], List[Measurement]] = {}
    for m in results.records:
        if m.cell.setting == setting:
            points.setdefault((m.cell.variant or m.cell.model, x_value(m, vary)), []).append(m)
    priors = spread_priors(results.records, cpu=True)
    out = {}
    for key, runs in points.items():
        cost = cpu_cost_over_runs(runs, prior=priors.get(worker_group(runs[0])))
        if cost is not None:
            out[key] = cost
    return out


@dataclass(frozen=True)
class VariantSetup:
    """How a variant was loaded: its interface ``type``, or the ``module`` built from its YAML, and the
    hyperparameters it overrides."""

    type: Optional[str] = None
    module: Optional[str] = None
    overrides: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Schedule:
    """What each point ran: the fixed size (``audio_s`` when the batch size varies, else ``batch_size``), the
    warm-up and measured calls, the input (``None`` where the results file does not say)."""

    audio_s: Optional[float]
    batch_size: Optional[int]
    warmup: int
    measured: int
    input: Optional[str]


@dataclass(frozen=True)
class ComparisonSummary:
    """Everything a comparison's reports show (see the module docstring)."""

    schedule: Schedule
    machine: MachineFacts
    models: Dict[str, VariantSetup]
    vary: str
    settings: List[CompareSetting]
    example_audio: Optional[str]
    energy: str
    rows: List[CellRow]
    limits: Limits = field(default_factory=Limits)

    @property
    def values(self) -> List[float]:
        """Every value of the varied dimension, measured or failed, in any setting."""
        return sorted({p.x for s in self.settings for series in s.series for p in series.points}
                      | {x for s in self.settings for series in s.series for x, _ in series.failures})

    @property
    def runs(self) -> int:
        return max((p.runs for s in self.settings for series in s.series for p in series.points), default=0)


def energy_line(series: Sequence[Series]) -> str:
    """One line: energy measured on which domains, or "not measurable here" with the reasons."""
    energies = [p.energy for s in series for p in s.points if p.energy is not None]
    if not energies:
        return "not recorded"
    if any(e.measurable for e in energies):
        domains = sorted({d for e in energies for d in e.joules_per_call})
        return (f"measured ({', '.join(domains)}): joules per call and average watts over each point's window "
                "of measured calls plus the memory call (medians over runs)")
    return energies[0].describe()


def analyse(results: Results) -> ComparisonSummary:
    """The one analysis of a comparison's results (see the module docstring)."""
    settings = []
    for device, threads in settings_of(results):
        series = build_series(results, (device, threads))
        settings.append(CompareSetting(device, threads, series, find_crossovers(series),
                                       cpu_costs(results, (device, threads))))
    first = results.records[0] if results.records else None
    rules = results.rules
    return ComparisonSummary(
        schedule=Schedule(audio_s=rules.get("audio_s"), batch_size=rules.get("batch_size"),
                          warmup=rules.get("warmup", 0), measured=rules.get("measured", 0), input=rules.get("input")),
        machine=results_facts(results),
        models={name: VariantSetup(info.get("type"), info.get("module"), dict(info.get("overrides") or {}))
                for name, info in results.models.items()},
        vary=rules.get("vary", "audio_s"), settings=settings,
        example_audio=first.settings.get("example_audio") if first else None,
        energy=energy_line([s for setting in settings for s in setting.series]),
        rows=[record_row(m, cell_figures(m)) for m in sorted(results.records, key=cell_sort_key)],
        limits=comparison_limits(settings, rules.get("vary", "audio_s")))


UNITS = {"audio_s": "s", "frames": "frames", "batch_size": "utterances"}
"""The varied dimension's unit, as a verdict's figures name it."""


def _at(x: float, vary: str) -> str:
    return f"batch {x:g}" if vary == "batch_size" else f"{x:g} {UNITS.get(vary, '')}".strip()


def cheapest(setting: CompareSetting, vary: str, label: str) -> Tuple[Optional[Verdict], Optional[str]]:
    """The variant costing least per audio second at the largest size every variant was measured at, or why the
    two cheapest cannot be told apart (their quartiles overlap)."""
    points = {s.variant: {p.x: p for p in s.points if p.rtfx} for s in setting.series}
    points = {v: p for v, p in points.items() if p}
    if len(points) < 2:
        return None, None
    common = set.intersection(*(set(p) for p in points.values()))
    if not common:
        return None, f"{label}cheapest variant: no size was measured for every variant"
    x = max(common)
    # per audio second: the call's time over its audio (the audio is rtfx * median)
    cost = {v: (1 / p[x].rtfx, p[x].q1_s / p[x].median_s / p[x].rtfx, p[x].q3_s / p[x].median_s / p[x].rtfx)
            for v, p in points.items()}
    best, second = sorted(cost, key=lambda v: cost[v][0])[:2]
    if cost[best][2] >= cost[second][1]:
        return None, (f"{label}cheapest variant: at {_at(x, vary)} the quartiles of {best} and {second} overlap "
                      f"({cost[best][0]:.3g} and {cost[second][0]:.3g} s per audio second)")
    figures = [Figure(f"{v} per audio second at {_at(x, vary)}", cost[v][0], "s", cost[v][1], cost[v][2])
               for v in (best, second)]
    return Verdict("cheapest", f"{label}{best} is the cheapest per audio second at {_at(x, vary)}: "
                   f"{cost[second][0] / cost[best][0]:.3g}x less than {second}, the next.", figures,
                   THRESHOLDS["cheapest"].text, f"{best}, where its accuracy is enough",
                   weight=1 - cost[best][0] / cost[second][0]), None


def crossing(setting: CompareSetting, c: Crossover, vary: str, label: str) -> Tuple[Optional[Verdict],
                                                                                   Optional[str]]:
    """Where two variants' growth laws cross, unless either law misses its own held-out points."""
    laws = {s.variant: s.growth.best for s in setting.series if s.growth is not None}
    loose = [f"{v} {laws[v].loo_rel_error * 100:.0f} %" for v in (c.first, c.second)
             if laws[v].loo_rel_error > THRESHOLDS["fit"].value]
    if loose:
        return None, (f"{label}crossing of {c.first} and {c.second}: the laws miss their left-out points "
                      f"({', '.join(loose)}; over {THRESHOLDS['fit'].value * 100:.0f} %)")
    a, b = laws[c.first], laws[c.second]
    lo, hi = max(a.n_min, b.n_min), min(a.n_max, b.n_max)
    gap = max(abs(a.predict(n) - b.predict(n)) / max(a.predict(n), b.predict(n)) for n in (lo, hi))
    figures = [Figure("crossing", c.at, UNITS.get(vary, ""))] + [
        Figure(f"leave-one-out error of {v} ({laws[v].form})", laws[v].loo_rel_error, "share")
        for v in (c.first, c.second)]
    return Verdict("crossover", f"{label}{c.faster_below} is faster below {_at(c.at, vary)} and {c.faster_above} "
                   f"above: their growth laws cross there.", figures, THRESHOLDS["crossover"].text,
                   f"{c.faster_below} under {_at(c.at, vary)}, {c.faster_above} beyond", weight=gap), None


def comparison_limits(settings: Sequence[CompareSetting], vary: str) -> Limits:
    """Per setting, the cheapest variant and every crossing of the growth laws (see :mod:`sbprof.analysis.limits`).

    Example
    -------
    >>> from sbprof.analysis.growth import choose_growth_law
    >>> from sbprof.analysis.series import Point
    >>> def series(name, t):
    ...     pts = tuple(Point(x, 1, t(x), t(x) * 0.99, t(x) * 1.01, t(x), t(x), 3, x / t(x), None, None, None)
    ...                 for x in (1.0, 2.0, 4.0, 8.0))
    ...     return Series(name, name, None, pts, (), choose_growth_law([p.x for p in pts], [p.median_s for p in pts]),
    ...                   None)
    >>> s = [series("lin", lambda x: 0.02 * x), series("quad", lambda x: 0.005 * x * x)]
    >>> for v in comparison_limits([CompareSetting("cpu", 1, s, find_crossovers(s))], "audio_s").verdicts:
    ...     print(v.sentence)
    quad is faster below 4 s and lin above: their growth laws cross there.
    lin is the cheapest per audio second at 8 s: 2x less than quad, the next.
    """
    candidates: List[Optional[Verdict]] = []
    undecided: List[str] = []
    for setting in settings:
        label = f"{setting.device}, {setting.threads} thread{'s' if setting.threads != 1 else ''}: " \
            if len(settings) > 1 else ""
        found = [cheapest(setting, vary, label)] + [crossing(setting, c, vary, label) for c in setting.crossovers]
        candidates += [v for v, _ in found]
        undecided += [why for _, why in found if why]
    return limits(candidates, undecided)
