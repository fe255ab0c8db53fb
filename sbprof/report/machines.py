"""The merged report of several machines: their environments, then their figures side by side (formats a summary).

Each figure comes from one machine's records only (:mod:`sbprof.analysis.machines`):
a comparison's latency per point with machines as columns, its growth
exponents, and one plot with a line per (machine, setting, variant); a
sweep's RTF per grid cell with (machine, setting) as columns; for both, the
CPU cost beside (CPU settings only).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

from sbprof.analysis.machines import GridRtf, MachinesSummary
from sbprof.analysis.series import VARIED
from sbprof.report.compare_models import cpu_cost_cell, exponent_text, latency_text, x_text
from sbprof.report.format import machine_line, plural, sig3, status_text, table
from sbprof.report.plot import PLOT_DIR, Line, latency_figure, png_bytes, without_fit
from sbprof.report.sweep_cells import CPU_COST
from sbprof.base.stats import METRICS

REPORT_FILE = "report.md"
LINE_STYLES = ["-", "--", ":", "-."]


def _column(label: str, device: str, threads: int, columns: int) -> str:
    return label if columns == 1 else f"{label}: {device}, {plural(threads, 'thread')}"


def _compare_sections(summary: MachinesSummary) -> List[str]:
    columns = summary.compare
    labels = [_column(c.label, c.device, c.threads, len({(d.device, d.threads) for d in columns}))
              for c in columns]
    per_column = [{s.variant: s for s in c.series} for c in columns]
    variants = list(dict.fromkeys(v for series in per_column for v in series))
    vary = summary.vary
    rows, costs, laws = [], [], []
    for v in variants:
        for x in sorted({p.x for series in per_column if v in series for p in series[v].points}):
            row = [v, x_text(x, vary)]
            for series in per_column:
                point = next((p for p in series[v].points if p.x == x), None) if v in series else None
                row.append(latency_text(point) if point else "not measured")
            rows.append(row)
            costs.append([v, x_text(x, vary)] + [cpu_cost_cell(c.cpu_costs.get((v, x))) for c in columns])
        laws.append([v] + [exponent_text(series[v]) if v in series else "n/a" for series in per_column])
    lines = ["", "## Latency per point (ms), machines as columns", "",
             "Each figure from its own machine's records only: median over runs of each run's median "
             "[first, third quartile of all calls].", "", table(rows, ["variant", VARIED.get(vary, vary)] + labels)]
    if any(c.cpu_costs for c in columns):
        lines += ["", "## CPU cost per point (core-seconds per audio second), machines as columns", "",
                  f"{CPU_COST}. Median over runs [its interval over runs]; n/a on CUDA. Each from its own machine's "
                  "records only.", "", table(costs, ["variant", VARIED.get(vary, vary)] + labels)]
    return lines + ["", "## Growth exponent b per machine (95% interval)", "", table(laws, ["variant"] + labels)]


def _rtf_text(cell: Optional[GridRtf]) -> str:
    if cell is None:
        return "not measured"
    if cell.median is None:
        return status_text(cell.failed) or "n/a"
    return f"{sig3(cell.median)} [{sig3(cell.pooled.q1)}, {sig3(cell.pooled.q3)}]"


def _sweep_sections(summary: MachinesSummary) -> List[str]:
    lines = []
    for model in summary.sweeps:
        headers = ["audio x batch"] + [f"{label}: {d}, {plural(t, 'thread')}" for label, d, t in model.columns]
        rows = [[f"{a:g} s x {b}"] + [_rtf_text(c) for c in cells] for (a, b), cells in model.rows.items()]
        lines += ["", f"## {model.model}: RTF, machines and settings as columns", "",
                  f"RTF = {METRICS['rtf'].definition}; median over runs of each run's median [first, third quartile "
                  "of all batches], each from its own machine's records only.", "", table(rows, headers)]
        if any(c is not None and c.cpu_cost is not None for cells in model.rows.values() for c in cells):
            costs = [[f"{a:g} s x {b}"] + [cpu_cost_cell(c.cpu_cost if c is not None else None) for c in cells]
                     for (a, b), cells in model.rows.items()]
            lines += ["", f"## {model.model}: CPU cost (core-seconds per audio second), machines and settings as "
                      "columns", "", f"{CPU_COST}. Median over runs [its interval over runs]; n/a on CUDA.", "",
                      table(costs, headers)]
    return lines


def render_merged(summary: MachinesSummary, plots: Optional[Dict[str, str]] = None,
                  title: str = "sbprof results of several machines") -> str:
    """Markdown of several machines' results side by side."""
    lines = [f"# {title}", "", "## Machines", "",
             table([[m.label, machine_line(m.environment), f"`{m.source}`"] for m in summary.machines],
                   ["machine", "environment", "results"])]
    lines += _compare_sections(summary) if summary.job == "compare-models" else _sweep_sections(summary)
    for name, path in (plots or {}).items():
        lines += ["", f"![{name}]({path})"]
    return "\n".join(lines) + "\n"


def machines_lines(summary: MachinesSummary) -> List[Line]:
    """One line per (machine, setting, variant): a colour per variant, a line style per machine and setting."""
    columns = [c for c in summary.compare if any(s.points for s in c.series)]
    variants = sorted({s.variant for c in columns for s in c.series if s.points})
    several = len({(c.device, c.threads) for c in columns}) > 1
    return [Line(f"{_column(c.label, c.device, c.threads, 2 if several else 1)}: {s.variant}", without_fit(s),
                 f"C{variants.index(s.variant) % 10}", LINE_STYLES[i % len(LINE_STYLES)])
            for i, c in enumerate(columns) for s in c.series if s.points]


def render(summary: MachinesSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md`` and, for comparisons, ``plots/machines-latency.png`` (a line per machine): file name -> content."""
    plots: Dict[str, bytes] = {}
    lines = machines_lines(summary) if summary.job == "compare-models" else []
    if lines:
        plots[f"{PLOT_DIR}/machines-latency.png"] = png_bytes(latency_figure(lines, summary.vary,
                                                                              title="Latency per machine"))
    return {REPORT_FILE: render_merged(summary, {"machines latency": path for path in plots}), **plots}
