"""The reports of a comparison: markdown per setting, the records' CSV and the plots (formats a summary only).

:func:`render` (the compare-models job's renderer) formats
one :class:`~sbprof.analysis.compare_models.ComparisonSummary` in each format;
the markdown embeds the PNGs (:mod:`sbprof.report.plot`) by relative path.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from sbprof.analysis.compare_models import CompareSetting, ComparisonSummary, VariantSetup
from sbprof.analysis.intervals import RunsSummary
from sbprof.analysis.series import VARIED, Crossover, Point, Series
from sbprof.report.cells_csv import render_csv
from sbprof.report.format import known, machine_line, plural, sig3, status_text, table
from sbprof.report.limits import render_limits
from sbprof.report.plot import Line, growth_label, render_series_plots
from sbprof.report.sweep_cells import CPU_COST
from sbprof.base.stats import METRICS

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"
MS = 1e3


def x_text(x: float, vary: str) -> str:
    """The varied value with its unit.

    Example
    -------
    >>> x_text(2.0, "audio_s"), x_text(400.0, "frames"), x_text(8.0, "batch_size")
    ('2 s', '400 frames', 'batch 8')
    """
    return {"audio_s": f"{x:g} s", "frames": f"{x:g} frames", "batch_size": f"batch {x:g}"}[vary]


def latency_text(p: Point) -> str:
    return f"{sig3(p.median_s * MS)} [{sig3(p.q1_s * MS)}, {sig3(p.q3_s * MS)}]"


def growth_text(s: Series) -> str:
    """The chosen growth form with its leave-one-out error, or why none was fitted."""
    if s.growth is None:
        return f"not fitted ({s.growth_note})"
    best = s.growth.best
    return f"{best.form}: {best.formula()} s (leave-one-out error {100 * best.loo_rel_error:.1f}%)"


def exponent_text(s: Series) -> str:
    if s.power is None:
        return "n/a"
    b, interval = s.power.coefficients[1], s.power.exponent_interval
    return f"{b:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else " (no interval: 2 points)")


def _memory_mb(gb: Optional[float]) -> str:
    return "n/a" if gb is None else f"{gb * 1e3:.1f}"


def _energy_cell(p: Point) -> str:
    if p.energy is None:
        return "n/a"
    return p.energy.describe() if p.energy.measurable else "not measurable"


def cpu_cost_cell(cost: Optional[RunsSummary]) -> str:
    """A point's CPU cost: ``median [low, high]`` over runs (the median alone from one run), ``n/a`` without one.

    Example
    -------
    >>> from sbprof.analysis.intervals import summarise_runs
    >>> cpu_cost_cell(summarise_runs([[0.2], [0.2]])), cpu_cost_cell(None)
    ('0.200 [0.200, 0.200]', 'n/a')
    """
    if cost is None:
        return "n/a"
    i = cost.interval
    return sig3(i.median) if i.runs < 2 else f"{sig3(i.median)} [{sig3(i.low)}, {sig3(i.high)}]"


def _setup_lines(summary: ComparisonSummary) -> List[str]:
    schedule, m = summary.schedule, summary.machine
    vary = summary.vary
    fixed = (f"{schedule.audio_s:g} s per utterance" if vary == "batch_size"
             else f"batch size {known(schedule.batch_size)}")
    source = (f"real recording `{summary.example_audio}`, fitted to each length" if summary.example_audio
              else "seeded noise")
    settings = "; ".join(f"{s.device}, {plural(s.threads, 'thread')}" for s in summary.settings)
    return [
        f"- **Varied**: {VARIED.get(vary, vary)}: {', '.join(f'{v:g}' for v in summary.values)} ({fixed})",
        f"- **Schedule**: {plural(schedule.warmup, 'warm-up call')}, then "
        f"{plural(schedule.measured, 'measured call')} per point, then one call for memory; each variant "
        f"in {plural(summary.runs, 'fresh worker process', 'fresh worker processes')} (runs interleaved across variants)",
        f"- **Setting{'s' if len(summary.settings) > 1 else ''}**: {settings or '?'}",
        f"- **Input**: {source} (`{known(schedule.input)}`)",
        f"- **Machine**: {machine_line(m)}",
        f"- **Energy**: {summary.energy}",
    ]


def _variant_rows(models: Dict[str, VariantSetup], series: Sequence[Series]) -> List[List[str]]:
    rows = []
    for s in series:
        info = models.get(s.variant, VariantSetup())
        how = info.type or f"module `{known(info.module)}`"
        if info.overrides:
            how += ", " + ", ".join(f"{k}={v}" for k, v in info.overrides.items())
        params = f"{s.params / 1e6:.2f} M" if s.params else "n/a"
        rows.append([s.variant, f"`{Path(s.model).name}`", how, params, growth_text(s), exponent_text(s)])
    return rows


POOR_FIT = 0.20
"""A fitted law whose leave-one-out error exceeds this predicts its own points poorly: its crossings are flagged."""


def _crossover_lines(series: Sequence[Series], found: Sequence[Crossover], vary: str) -> List[str]:
    if not found:
        return ["No two fitted laws cross inside the range both variants were measured over."]
    errors = {s.variant: s.growth.best.loo_rel_error for s in series if s.growth is not None}
    lines = []
    for c in found:
        line = (f"- {c.first} and {c.second} cross at {x_text(float(f'{c.at:.3g}'), vary)}: {c.faster_below} is "
                f"faster below, {c.faster_above} above.")
        poor = [f"{v} {100 * errors[v]:.0f}%" for v in (c.first, c.second) if errors[v] > POOR_FIT]
        if poor:
            line += (f" The fits are loose (leave-one-out error {', '.join(poor)}): read the measured points "
                     "rather than this crossing.")
        lines.append(line)
    return lines


def _setting_lines(summary: ComparisonSummary, setting: CompareSetting, plots: Dict[str, str],
                   heading: str) -> List[str]:
    series, vary = setting.series, summary.vary
    lines = ["", f"{heading} Variants", "",
             "Parameters: every parameter of the loaded modules, shared tensors once. Growth law: latency "
             "fitted on (size, run median) by each form (power a*n^b, linear a+b*n, quadratic a+b*n+c*n^2) and "
             "the form with the lowest leave-one-out relative error chosen; b: the power law's exponent with its "
             "95% interval (1: linear, 2: quadratic).", "",
             table(_variant_rows(summary.models, series),
                   ["variant", "model", "interface", "parameters", "growth law (chosen form)", "exponent b"]),
             ""] + _crossover_lines(series, setting.crossovers, vary)
    for name, path in plots.items():
        lines += ["", f"![{name} versus {VARIED.get(vary, vary)}]({path})"]
    rows = []
    for s in series:
        for p in s.points:
            rows.append([s.variant, x_text(p.x, vary), latency_text(p),
                         f"{p.runs}" + (f" ({sig3(p.run_min_s * MS)}-{sig3(p.run_max_s * MS)})" if p.runs > 1 else ""),
                         sig3(p.rtfx) if p.rtfx else "n/a", cpu_cost_cell(setting.cpu_cost(s.variant, p.x)),
                         _memory_mb(p.batch_memory_gb),
                         "n/a" if p.peak_memory_gb is None else f"{p.peak_memory_gb:.3f}", _energy_cell(p)])
        rows += [[s.variant, x_text(x, vary), status_text(m) or "no samples", "", "", "", "", "", ""]
                 for x, m in s.failures]
    return lines + [
        "", f"{heading} Per point", "",
        f"Latency: {METRICS['wall_s'].definition}, in ms: median over runs of each run's median "
        "[first, third quartile of all calls]; runs: fresh worker processes (smallest-largest run median). "
        f"RTFx = {METRICS['rtfx'].definition}, from the median latency. {CPU_COST}, in core-seconds per audio "
        "second (= core-hours per hour of audio, the same ratio): median over runs [its interval over runs, "
        "computed as the sweep's RTF interval]; n/a on CUDA, where the latency (synchronised) is the figure. "
        "Memory added = "
        f"{METRICS['peak_rss_delta_bytes'].definition} (on CUDA: the allocator's). Peak = "
        f"{METRICS['peak_rss_bytes'].definition} (on CUDA: the allocator's). Energy per call: each domain's "
        "joules over the measured calls and the memory call, divided by their number, with the average "
        "watts.", "",
        table(rows, ["variant", VARIED.get(vary, vary), "latency ms", "runs", "RTFx", "CPU cost", "memory added MB",
                     "peak GB", "energy per call"])]


def render_comparison(summary: ComparisonSummary, plots: Optional[Dict[str, Dict[str, str]]] = None,
                      title: str = "sbprof comparison report") -> str:
    """The comparison report as markdown: a section per setting when there are several.

    ``plots`` maps a setting's name (``cpu, 1 thread``) to ``latency``/``memory`` paths relative to the report.
    """
    if not summary.rows:
        return f"# {title}\n\nNo point recorded yet.\n"
    lines = [f"# {title}", ""] + _setup_lines(summary)
    several = len(summary.settings) > 1
    for setting in summary.settings:
        name = setting_label(setting)
        if several:
            lines += ["", f"## {name}"]
        lines += _setting_lines(summary, setting, (plots or {}).get(name, {}), "###" if several else "##")
    lines += ["", render_limits(summary.limits)]
    return "\n".join(lines) + "\n"


def setting_label(setting: CompareSetting) -> str:
    return f"{setting.device}, {plural(setting.threads, 'thread')}"


def render(summary: ComparisonSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md``, ``results.csv`` and each setting's latency and memory plots: file name -> content."""
    m = summary.machine
    where = m.hostname or f"{known(m.cpu)} ({known(m.cpu_count)} cores)"
    several = len(summary.settings) > 1
    pngs: Dict[str, bytes] = {}
    embedded: Dict[str, Dict[str, str]] = {}
    for setting in summary.settings:
        series = [s for s in setting.series if s.points]
        if not series:
            continue
        lines = [Line(growth_label(s), s, f"C{i % 10}") for i, s in enumerate(series)]
        prefix = f"{setting.name}-" if several else ""
        plots = render_series_plots(lines, summary.vary, setting.crossovers, f"{where}: {setting_label(setting)}",
                                    prefix)
        embedded[setting_label(setting)] = {n: path for n, (path, _) in plots.items()}
        pngs.update(plots.values())
    return {REPORT_FILE: render_comparison(summary, embedded), CSV_FILE: render_csv(summary.rows), **pngs}
