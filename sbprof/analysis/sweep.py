"""A sweep's results analysed once: everything its markdown, CSV and plots show, computed before they render.

:func:`analyse` groups the records by model, setting and grid cell,
summarises each cell over its runs (the RTF interval, the within-run spread,
the memory medians, the host/GPU busy split), predicts the cells that were
skipped or ran out of memory, validates those predictions on a fully measured
grid, reads each setting's noise floor (its reference batch, timed in every
worker process) beside its cells' own spread between runs, and the CPU that
other processes took while the cells were timed, and lays out the plot's
lines. The renderers (:mod:`sbprof.report.sweep`) only format the
:class:`SweepSummary` it returns. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.cell_payload import cell_payload
from sbprof.analysis.cell_rows import CellRow, predicted_rows, record_row
from sbprof.analysis.costmodel import HeldOutReport
from sbprof.analysis.figures import batch_audio_seconds, busy_rtf, cell_figures, cell_sort_key, setting_sort_key
from sbprof.analysis.intervals import RunsSummary, SpreadPrior
from sbprof.analysis.limits import Limits
from sbprof.analysis.machine_facts import MachineFacts, results_facts
from sbprof.analysis.machine_load import OthersLoad, others_of, oversubscribed
from sbprof.analysis.predictions import (CellPrediction, ShownPrediction, held_out_validation, predict_cells,
                                         shown_predictions)
from sbprof.analysis.runs import (NoiseFloor, cpu_cost_over_runs, group_runs, load_explains, median_over_runs,
                                  noise_floor, others_load, representative, rtf_over_runs, spread_priors, worker_group)
from sbprof.analysis.sweep_limits import TimeModel, cell_rtf, fit_time_model, sweep_limits
from sbprof.analysis.sweep_plot import PlotLine, plot_lines
from sbprof.base.stats import Stats, summarise
from sbprof.record import STATUSES, Cell, Measurement
from sbprof.record.results import Results

GridKey = Tuple[float, int]
SettingKey = Tuple[str, int]


@dataclass(frozen=True)
class BusyRtf:
    """Host-busy and GPU-busy RTF of a cell's profiled batch, beside that batch's own RTF (``profiled``)."""

    host: float
    gpu: float
    profiled: float


@dataclass(frozen=True)
class SweepCell:
    """One grid cell of one setting: what its runs measured, or its status, and its predictions.

    ``status`` and ``message`` are those of the record that speaks for the
    cell (its first successful run, else its first run); ``one_run`` the RTF
    over the batches of a cell measured once, ``over_runs`` the RTF over runs
    of a cell measured several times; ``busy_error`` why its profiled batch
    gave no busy time; ``predicted``: keyed ``rtf``, ``rtfx``,
    ``batch_memory_bytes``, ``peak_memory_bytes``, the predictions its
    tables show; ``cell``: the cell of its first run (``results.json``'s
    summary names it so), ``outlier_runs`` the run numbers ``over_runs``
    leaves out of the spread.
    """

    status: str
    runs: int
    message: str = ""
    one_run: Optional[Stats] = None
    over_runs: Optional[RunsSummary] = None
    target_missed: bool = False
    rtfx: Optional[float] = None
    busy: Optional[BusyRtf] = None
    busy_error: Optional[str] = None
    added_bytes: Optional[float] = None
    peak_bytes: Optional[float] = None
    predicted: Dict[str, ShownPrediction] = field(default_factory=dict)
    cpu_one_run: Optional[Stats] = None
    cpu_over_runs: Optional[RunsSummary] = None
    others_load: Optional[float] = None
    judged_on_cpu: bool = False
    cell: Optional[Cell] = None
    outlier_runs: Tuple[int, ...] = ()

    @property
    def cpu_cost(self) -> Optional[float]:
        """Core-seconds per audio second (median over runs, or over one run's calls); ``None`` on CUDA."""
        if self.cpu_over_runs is not None:
            return self.cpu_over_runs.interval.median
        return None if self.cpu_one_run is None else self.cpu_one_run.median


@dataclass(frozen=True)
class SweepSetting:
    """One (device, threads) of one model: its cells and what the report says about them.

    ``noise``: the reference batch's spread between this setting's worker
    processes; ``cells_cv``: the median over cells of their own spread
    between runs (outliers left out), to be read against it.
    """

    device: str
    threads: int
    cells: Dict[GridKey, SweepCell]
    cores: Optional[int]
    loads: Optional[Tuple[float, float]]
    others: Optional[OthersLoad]
    noise: Optional[NoiseFloor]
    cells_cv: Optional[float]
    run_counts: Tuple[int, ...]
    target: Optional[float]
    max_runs: Any
    met: int
    levels: Tuple[int, ...]
    formula: Optional[str]
    held_out: Dict[str, HeldOutReport]
    cpu_cost_median: Optional[float] = None
    judged_on_cpu: int = 0
    judged_load: Optional[float] = None
    missed: Tuple[GridKey, ...] = ()
    time_model: Optional[TimeModel] = None
    time_not_predicted: bool = False  # oversubscribed: its skipped and out-of-memory cells get no predicted time

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def measured_cells(self) -> int:
        """Cells with at least one successful run."""
        return sum(1 for c in self.cells.values() if c.runs)

    @property
    def held_out_inside(self) -> Dict[str, int]:
        """Per held-out figure, the corner cells inside their 95 % interval (or above their bound)."""
        return {figure: sum(c.inside for c in r.cells) for figure, r in self.held_out.items()}

    @property
    def oversubscribed(self) -> bool:
        """More runnable threads than cores: the worker's own, or with the others' load counted."""
        return oversubscribed(self.device, self.threads, self.cores, self.others)


@dataclass(frozen=True)
class SweepModel:
    """One model (and variant) of a sweep: its grid, per setting, and its plot."""

    name: str
    model: str
    variant: Optional[str]
    interface: str
    method: Optional[str]
    audio_secs: List[float]
    batch_sizes: List[int]
    settings: List[SweepSetting]
    plot: List[PlotLine]
    predicted: List[CellPrediction]


@dataclass(frozen=True)
class SweepSummary:
    """Everything a sweep's reports show (see the module docstring)."""

    models: List[SweepModel]
    rows: List[CellRow]
    counts: Dict[str, int]
    machine: MachineFacts
    example_audio: Optional[str]
    input: str
    warmup: int
    measured: int
    fill: bool
    validate: bool
    measured_min_s: Optional[float] = None
    process_warmup: bool = False
    limits: Limits = field(default_factory=Limits)


def _busy(m: Measurement) -> Optional[BusyRtf]:
    busy = busy_rtf(m)
    return None if busy is None else BusyRtf(busy["host_busy_rtf"], busy["gpu_busy_rtf"], busy["profiled_rtf"])


def _cell(runs: Sequence[Measurement], predictions: Dict[str, CellPrediction],
          prior: Optional[SpreadPrior], cpu_prior: Optional[SpreadPrior] = None) -> SweepCell:
    rep = representative(runs)
    ok = [m for m in runs if m.ok and m.wall_s]
    if not ok:
        return SweepCell(status=rep.status, runs=0, message=rep.message,
                         predicted=shown_predictions(rep.cell.grid_key, predictions), cell=runs[0].cell)
    confidence = float(rep.settings.get("repeats", {}).get("confidence", 0.95))
    summary = rtf_over_runs(ok, confidence, prior)
    cpu = cpu_cost_over_runs(ok, confidence, cpu_prior)
    load = others_load(ok)
    # Others' load explains the wall-time spread: precision is judged on CPU time, as adaptive repeats did.
    on_cpu = len(ok) > 1 and load_explains(load, summary.interval, cpu.interval if cpu else None)
    judged = cpu.interval if on_cpu and cpu is not None else summary.interval
    policy = rep.settings.get("repeats", {})
    target = policy.get("target") if policy.get("runs") == "adaptive" else None
    # Fewer runs than the policy's minimum (a run stopped by its time budget) did not reach the target either.
    least = min(int(policy.get("min_runs") or 1), int(policy.get("max_runs") or 1))
    missed = target is not None and (len(ok) < least or len(ok) > 1 and not (
        judged.confidence >= float(policy.get("confidence", 0.95)) and judged.within(target)))
    memory = "cuda" if rep.cell.device.startswith("cuda") else "rss"
    return SweepCell(
        status=rep.status, runs=len(ok), message=rep.message,
        one_run=summarise([w / batch_audio_seconds(ok[0]) for w in ok[0].wall_s]) if len(ok) == 1 else None,
        over_runs=summary if len(ok) > 1 else None, target_missed=missed,
        rtfx=1 / summary.interval.median if summary.interval.median > 0 else None, busy=_busy(rep),
        busy_error=cell_payload(rep).extra_error,
        added_bytes=median_over_runs(ok, lambda m: getattr(m.memory, f"peak_{memory}_delta_bytes", None)
                                     if m.memory else None),
        peak_bytes=median_over_runs(ok, lambda m: getattr(m.memory, f"peak_{memory}_bytes", None)
                                    if m.memory else None),
        cpu_one_run=summarise([c / batch_audio_seconds(ok[0]) for c in ok[0].cpu_s])
        if cpu is not None and len(ok) == 1 else None,
        cpu_over_runs=cpu if cpu is not None and len(ok) > 1 else None, others_load=load, judged_on_cpu=on_cpu,
        cell=runs[0].cell, outlier_runs=tuple(ok[i].cell.run for i in summary.interval.outliers))


def _setting(device: str, threads: int, records: List[Measurement], references: List[Measurement],
             predicted: Dict[Tuple[GridKey, str], Any], validate: bool, fill: bool) -> SweepSetting:
    groups = list(group_runs(records).values())
    priors, cpu_priors = spread_priors(records), spread_priors(records, cpu=True)
    cells = {}
    for runs in groups:
        key = runs[0].cell.grid_key
        cells[key] = _cell(runs, {figure: p for (k, figure), p in predicted.items() if k == key},
                           priors[worker_group(runs[0])], cpu_priors[worker_group(runs[0])])
    loads = [p.loadavg_1m for p in map(cell_payload, records) if p.loadavg_1m is not None]
    ok = [c for c in cells.values() if c.runs]
    policy = next((representative(runs).settings.get("repeats", {}) for runs in groups
                   if any(m.ok and m.wall_s for m in runs)), {})
    target = policy.get("target") if policy.get("runs") == "adaptive" else None
    several = [c for c in ok if c.over_runs is not None]
    spreads = [c.over_runs.run_cv for c in several if c.over_runs.run_cv is not None]
    reports = held_out_validation(records) if validate else {}
    cores = next((m.env.cpu_count for m in records if m.env is not None), None)
    others = others_of(groups, threads, cores)
    costs = [c.cpu_cost for c in ok if c.cpu_cost is not None]
    on_cpu = [c.others_load for c in several if c.judged_on_cpu]
    return SweepSetting(
        device=device, threads=threads, cells=cells, cores=cores,
        loads=(min(loads), max(loads)) if loads else None, others=others,
        noise=noise_floor(references), cells_cv=statistics.median(spreads) if spreads else None,
        run_counts=tuple(sorted({c.runs for c in ok})), target=target, max_runs=policy.get("max_runs"),
        met=sum(1 for c in several if not c.target_missed),
        levels=tuple(sorted({round(100 * c.over_runs.interval.confidence) for c in several})),
        formula=next((p.formula for (_, figure), p in predicted.items() if figure == "time_s"), None),
        held_out={figure: r for (s, figure), r in reports.items() if s == (device, threads)},
        cpu_cost_median=statistics.median(costs) if costs else None, judged_on_cpu=len(on_cpu),
        judged_load=statistics.median(on_cpu) if on_cpu else None,
        missed=tuple(sorted(k for k, c in cells.items() if c.target_missed)),
        time_model=fit_time_model({k: r[0] for k, r in ((k, cell_rtf(c)) for k, c in cells.items() if c.runs)
                                   if r is not None}),
        time_not_predicted=fill and oversubscribed(device, threads, cores, others) and any(
            c.status in ("skipped", "oom") for c in cells.values() if not c.runs))


def _by_model(records: Sequence[Measurement]) -> Dict[Tuple[str, str], List[Measurement]]:
    """Records per (model, variant): predictions and tables never mix two models."""
    grouped: Dict[Tuple[str, str], List[Measurement]] = {}
    for m in records:
        grouped.setdefault((m.cell.model, m.cell.variant or ""), []).append(m)
    return dict(sorted(grouped.items()))


def _model(model: str, variant: str, group: List[Measurement], references: List[Measurement], fill: bool,
           validate: bool) -> SweepModel:
    predicted = predict_cells(group) if fill else []
    by_setting: Dict[SettingKey, Dict[Tuple[GridKey, str], CellPrediction]] = {}
    for p in predicted:
        by_setting.setdefault((p.device, p.threads), {})[((p.audio_s, p.batch_size), p.figure)] = p
    settings: Dict[SettingKey, List[Measurement]] = {}
    for m in group:
        settings.setdefault(m.cell.setting, []).append(m)
    return SweepModel(
        name=f"{model} ({variant})" if variant else model, model=model, variant=variant or None,
        interface=group[0].settings.get("interface", "?"), method=group[0].settings.get("method"),
        audio_secs=sorted({m.cell.audio_s for m in group}), batch_sizes=sorted({m.cell.batch_size for m in group}),
        settings=[_setting(d, t, settings[(d, t)], [m for m in references if m.cell.setting == (d, t)],
                           by_setting.get((d, t), {}), validate, fill)
                  for d, t in sorted(settings, key=lambda k: setting_sort_key(*k))],
        plot=plot_lines(group), predicted=predicted)


def analyse(results: Results) -> SweepSummary:
    """The one analysis of a sweep's results (see the module docstring)."""
    records = results.records
    first = records[0] if records else None
    wanted = first.settings.get("predict", {}) if first else {}  # what the run asked for (older files: all)
    fill, validate = wanted.get("fill", True), wanted.get("validate", True)
    firsts = [representative(runs) for runs in group_runs(records).values()]
    references = _by_model(results.calibration)
    by_model = _by_model(records)
    models = {(model, variant): _model(model, variant, group, references.get((model, variant), []), fill, validate)
              for (model, variant), group in by_model.items()}
    return SweepSummary(
        models=list(models.values()),
        rows=[record_row(m, cell_figures(m)) for m in sorted(records, key=cell_sort_key)]
        + [row for (model, variant), group in by_model.items() for row in
           predicted_rows(model, variant or None, models[(model, variant)].predicted)],
        counts={s: sum(m.status == s for m in firsts) for s in STATUSES},
        machine=results_facts(results),
        example_audio=first.settings.get("example_audio") if first else None, input=first.cell.input if first else "",
        warmup=first.warmup if first else 0,
        measured=results.rules.get("measured", len(first.wall_s) if first else 0), fill=fill, validate=validate,
        measured_min_s=results.rules.get("measured_min_s"),
        process_warmup=any(cell_payload(m).process_warmup_calls is not None for m in [*records, *results.calibration]),
        limits=sweep_limits(list(models.values())))


def summary_block(summary: SweepSummary) -> Dict[str, Any]:
    """The ``summary`` block of a sweep's results.json, for readers without sbprof (never read back as data), from
    the analysis its report shows (the same intervals, at the configured ``repeats.confidence``).

    ``rtf``: per cell measured in several runs, the RTF over runs with both
    intervals (the typical value's and the order-statistics one for the
    median) and ``outlier_runs``, the run numbers left out of the spread;
    ``predicted``: predicted cells, kept apart from measured ones.

    Example
    -------
    >>> summary_block(analyse(Results("profile")))
    {'rtf': [], 'predicted': []}
    """
    over_runs = [{"cell": c.cell.to_dict() if c.cell else None, **c.over_runs.to_dict(),
                  "outlier_runs": list(c.outlier_runs)}
                 for model in summary.models for setting in model.settings for c in setting.cells.values()
                 if c.over_runs is not None]
    predicted = [{"model": model.model, "variant": model.variant, **p.to_dict()}
                 for model in summary.models for p in model.predicted]
    return {"rtf": over_runs, "predicted": predicted}
