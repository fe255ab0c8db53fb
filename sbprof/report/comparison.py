"""Markdown of comparisons, of several machines side by side, and the regression gate's table.

Renderers only: they read :class:`~sbprof.results.Results` (through
:mod:`sbprof.compare.series`) or a :class:`~sbprof.compare.gate.GateReport`
and return text; the ``write_*`` functions also write the PNGs
(:mod:`sbprof.report.plot`) that the markdown embeds by relative path.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from tabulate import tabulate

from sbprof.compare.gate import GATE_METRICS, RUN_LEVEL, GateReport
from sbprof.compare.merge import MachineResults
from sbprof.compare.schema import VARIED
from sbprof.compare.series import Point, Series, build_series, find_crossovers
from sbprof.figures import rtf_stats, setting_sort_key
from sbprof.record import Measurement
from sbprof.report.csv_table import render_csv
from sbprof.report.format import plural, sig3, status_text
from sbprof.report.plot import render_compare_plots, render_machines_plot
from sbprof.results.files import atomic_write_text
from sbprof.results.store import Results
from sbprof.stats import METRICS, summarise

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"
MS = 1e3


def _table(rows: List[List[str]], headers: List[str]) -> str:
    # disable_numparse: cells are already formatted; tabulate must not re-round them.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=["left"] * len(headers))


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


def energy_summary(series: Sequence[Series]) -> str:
    """One line: energy measured on which domains, or "not measurable here" with the reasons."""
    energies = [p.energy for s in series for p in s.points if p.energy is not None]
    if not energies:
        return "not recorded"
    if any(e.measurable for e in energies):
        domains = sorted({d for e in energies for d in e.joules_per_call})
        return (f"measured ({', '.join(domains)}): joules per call and average watts over each point's window "
                "of measured calls plus the memory call (medians over runs)")
    return energies[0].describe()


def _setup_lines(results: Results, series: Sequence[Series]) -> List[str]:
    rules = results.rules
    vary = rules.get("vary", "audio_s")
    values = sorted({p.x for s in series for p in s.points} | {x for s in series for x, _ in s.failures})
    fixed = (f"{rules['audio_s']:g} s per utterance" if vary == "batch_size"
             else f"batch size {rules.get('batch_size', '?')}")
    runs = max((p.runs for s in series for p in s.points), default=0)
    first = results.records[0] if results.records else None
    example = first.settings.get("example_audio") if first else None
    source = f"real recording `{example}`, fitted to each length" if example else "seeded noise"
    m = results.machine
    return [
        f"- **Varied**: {VARIED.get(vary, vary)}: {', '.join(f'{v:g}' for v in values)} ({fixed})",
        f"- **Schedule**: {plural(rules.get('warmup', 0), 'warm-up call')}, then "
        f"{plural(rules.get('samples', 0), 'measured call')} per point, then one call for memory; each variant "
        f"in {plural(runs, 'fresh worker process', 'fresh worker processes')} (runs interleaved across variants)",
        f"- **Setting**: {rules.get('device', '?')}, {plural(rules.get('threads', 1), 'thread')}",
        f"- **Input**: {source} (`{rules.get('input', '?')}`)",
        f"- **Machine**: {m.get('cpu', '?')} ({m.get('cpu_count', '?')} logical cores), GPU: {m.get('gpu') or 'none'}; "
        f"torch {m.get('torch', '?')}, speechbrain {m.get('speechbrain', '?')}, Python {m.get('python', '?')}",
        f"- **Energy**: {energy_summary(series)}",
    ]


def _variant_rows(results: Results, series: Sequence[Series]) -> List[List[str]]:
    rows = []
    for s in series:
        info = results.models.get(s.variant, {})
        how = info.get("type") or f"module `{info.get('module', '?')}`"
        overrides = info.get("overrides")
        if overrides:
            how += ", " + ", ".join(f"{k}={v}" for k, v in overrides.items())
        params = f"{s.params / 1e6:.2f} M" if s.params else "n/a"
        rows.append([s.variant, f"`{Path(s.model).name}`", how, params, growth_text(s), exponent_text(s)])
    return rows


POOR_FIT = 0.20
"""A fitted law whose leave-one-out error exceeds this predicts its own points poorly: its crossings are flagged."""


def _crossover_lines(series: Sequence[Series], vary: str) -> List[str]:
    found = find_crossovers(series)
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


def render_comparison(results: Results, plots: Optional[Dict[str, str]] = None,
                      title: str = "sbprof comparison report") -> str:
    """The comparison report as markdown; ``plots`` maps ``latency``/``memory`` to paths relative to the report."""
    if not results.records:
        return f"# {title}\n\nNo point recorded yet.\n"
    series = build_series(results)
    vary = results.rules.get("vary", "audio_s")
    lines = [f"# {title}", ""] + _setup_lines(results, series)
    lines += ["", "## Variants", "",
              "Parameters: every parameter of the loaded modules, shared tensors once. Growth law: latency "
              "fitted on (size, run median) by each form (power a*n^b, linear a+b*n, quadratic a+b*n+c*n^2) and "
              "the form with the lowest leave-one-out relative error chosen; b: the power law's exponent with its "
              "95% interval (1: linear, 2: quadratic).", "",
              _table(_variant_rows(results, series),
                     ["variant", "model", "interface", "parameters", "growth law (chosen form)", "exponent b"]),
              ""] + _crossover_lines(series, vary)
    for name, path in (plots or {}).items():
        lines += ["", f"![{name} versus {VARIED.get(vary, vary)}]({path})"]
    rows = []
    for s in series:
        for p in s.points:
            rows.append([s.variant, x_text(p.x, vary), latency_text(p),
                         f"{p.runs}" + (f" ({sig3(p.run_min_s * MS)}-{sig3(p.run_max_s * MS)})" if p.runs > 1 else ""),
                         sig3(p.rtfx) if p.rtfx else "n/a", _memory_mb(p.batch_memory_gb),
                         "n/a" if p.peak_memory_gb is None else f"{p.peak_memory_gb:.3f}", _energy_cell(p)])
        rows += [[s.variant, x_text(x, vary), status_text(m) or "no samples", "", "", "", "", ""]
                 for x, m in s.failures]
    lines += ["", "## Per point", "",
              f"Latency: {METRICS['wall_s'].definition}, in ms: median over runs of each run's median "
              "[first, third quartile of all calls]; runs: fresh worker processes (smallest-largest run median). "
              f"RTFx = {METRICS['rtfx'].definition}, from the median latency. Memory added = "
              f"{METRICS['peak_rss_delta_bytes'].definition} (on CUDA: the allocator's). Peak = "
              f"{METRICS['peak_rss_bytes'].definition} (on CUDA: the allocator's). Energy per call: each domain's "
              "joules over the measured calls and the memory call, divided by their number, with the average "
              "watts.", "",
              _table(rows, ["variant", VARIED.get(vary, vary), "latency ms", "runs", "RTFx", "memory added MB",
                            "peak GB", "energy per call"])]
    return "\n".join(lines) + "\n"


def write_comparison_reports(results: Results, folder: Union[str, Path]) -> Dict[str, Path]:
    """Write ``report.md``, ``results.csv`` and the plots into ``folder``; return their paths."""
    folder = Path(folder)
    plots = render_compare_plots(results, folder)
    paths = {"report": folder / REPORT_FILE, "csv": folder / CSV_FILE}
    atomic_write_text(paths["report"], render_comparison(
        results, {name: str(p.relative_to(folder)) for name, p in plots.items()}))
    atomic_write_text(paths["csv"], render_csv(results))
    return {**paths, **{f"{name} plot": p for name, p in plots.items()}}


# --- several machines ---------------------------------------------------------------------------------------

def _machines_table(machines: Sequence[MachineResults]) -> str:
    return _table([[m.label, m.environment(), f"`{m.source}`"] for m in machines],
                  ["machine", "environment", "results"])


def _compare_sections(machines: Sequence[MachineResults]) -> List[str]:
    per_machine = [{s.variant: s for s in build_series(m.results)} for m in machines]
    variants = list(dict.fromkeys(v for series in per_machine for v in series))
    vary = machines[0].results.rules.get("vary", "audio_s")
    headers = ["variant", VARIED.get(vary, vary)] + [m.label for m in machines]
    rows, laws = [], []
    for v in variants:
        xs = sorted({p.x for series in per_machine if v in series for p in series[v].points})
        for x in xs:
            row = [v, x_text(x, vary)]
            for series in per_machine:
                point = next((p for p in series[v].points if p.x == x), None) if v in series else None
                row.append(latency_text(point) if point else "not measured")
            rows.append(row)
        laws.append([v] + [exponent_text(series[v]) if v in series else "n/a" for series in per_machine])
    return ["", "## Latency per point (ms), machines as columns", "",
            "Each figure from its own machine's records only: median over runs of each run's median "
            "[first, third quartile of all calls].", "", _table(rows, headers),
            "", "## Growth exponent b per machine (95% interval)", "",
            _table(laws, ["variant"] + [m.label for m in machines])]


def _rtf_over_runs(records: Sequence[Measurement]) -> str:
    ok = [m for m in records if m.ok and m.wall_s and m.audio_seconds]
    if not ok:
        return status_text(records[0]) or "n/a"
    pooled = summarise([s / m.audio_seconds for m in ok for s in m.wall_s])
    return f"{sig3(statistics.median(rtf_stats(m).median for m in ok))} [{sig3(pooled.q1)}, {sig3(pooled.q3)}]"


def _sweep_sections(machines: Sequence[MachineResults]) -> List[str]:
    lines = []
    models = sorted({m.cell.model for mr in machines for m in mr.results.records})
    for model in models:
        columns: List[Tuple[int, Tuple[str, int]]] = sorted(
            {(i, m.cell.setting) for i, mr in enumerate(machines) for m in mr.results.records if m.cell.model == model},
            key=lambda c: (c[0],) + setting_sort_key(*c[1]))
        grid = sorted({m.cell.grid_key for mr in machines for m in mr.results.records if m.cell.model == model})
        rows = []
        for audio_s, batch in grid:
            row = [f"{audio_s:g} s x {batch}"]
            for i, setting in columns:
                found = [m for m in machines[i].results.records if m.cell.model == model
                         and m.cell.setting == setting and m.cell.grid_key == (audio_s, batch)]
                row.append(_rtf_over_runs(found) if found else "not measured")
            rows.append(row)
        headers = ["audio x batch"] + [f"{machines[i].label}: {d}, {plural(t, 'thread')}" for i, (d, t) in columns]
        lines += ["", f"## {model}: RTF, machines and settings as columns", "",
                  f"RTF = {METRICS['rtf'].definition}; median [first, third quartile] over the measured batches, "
                  "each from its own machine's records only.", "", _table(rows, headers)]
    return lines


def render_merged(machines: Sequence[MachineResults], plots: Optional[Dict[str, str]] = None,
                  title: str = "sbprof results of several machines") -> str:
    """Markdown of several machines' results side by side (see :mod:`sbprof.compare.merge`)."""
    lines = [f"# {title}", "", "## Machines", "", _machines_table(machines)]
    if machines[0].results.job == "compare":
        lines += _compare_sections(machines)
    else:
        lines += _sweep_sections(machines)
    for name, path in (plots or {}).items():
        lines += ["", f"![{name}]({path})"]
    return "\n".join(lines) + "\n"


def write_merged_report(machines: Sequence[MachineResults], folder: Union[str, Path]) -> Dict[str, Path]:
    """Write ``report.md`` (and, for comparisons, a latency plot of every machine) into ``folder``."""
    folder = Path(folder)
    plots = render_machines_plot(machines, folder) if machines[0].results.job == "compare" else {}
    path = folder / REPORT_FILE
    atomic_write_text(path, render_merged(machines, {n: str(p.relative_to(folder)) for n, p in plots.items()}))
    return {"report": path, **{f"{n} plot": p for n, p in plots.items()}}


# --- the gate ----------------------------------------------------------------------------------------------

def render_gate(report: GateReport) -> str:
    """The gate's verdicts as a table, a summary line and notes (plain text that is also markdown)."""
    rows = []
    for r in report.rows:
        v = r.verdict
        change = f"{v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}]" if v else "n/a"
        how = "run-level" if r.method == RUN_LEVEL else "WITHIN-RUN"
        rows.append([r.cell, r.status, change, f"{r.baseline_runs} / {r.candidate_runs}", how,
                     (v.reason if v else "") + (f"; {r.note}" if r.note and (not v or r.method != RUN_LEVEL) else "")])
    counts: Dict[str, int] = {}
    for r in report.rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines = [f"sbprof compare: {report.metric} ({GATE_METRICS[report.metric]}), each run's {report.statistic}; "
             f"regressed = more than {100 * report.threshold:g}% worse with the {100 * report.confidence:g}% "
             "interval excluding no change",
             "", _table(rows, ["cell", "verdict", "new / baseline [interval]", "runs base / new", "how", "why"]), "",
             ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))]
    if any(r.method != RUN_LEVEL for r in report.rows):
        lines.append("WITHIN-RUN rows treat every call as a sample: between-process noise (~10% here) is unseen, "
                     "so they flag unchanged code far more often than the stated level.")
    if report.unjudged:
        lines.append(f"{len(report.unjudged)} cell(s) not judged: measure at least 4 fresh-process runs a side "
                     "(runs: 4 in a comparison), or pass --within-run for a labelled within-run comparison.")
    for title, items in (("only in the baseline", report.only_baseline), ("only in the new run", report.only_candidate),
                         ("differences between the two", report.environment_notes)):
        if items:
            lines.append(f"{title}: {'; '.join(items)}")
    return "\n".join(lines) + "\n"
