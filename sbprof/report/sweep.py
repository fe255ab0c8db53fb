"""A sweep's reports, written together: ``report.md``, ``results.csv`` and the plots (``plots/``).

The job registry names :func:`write_reports` as the profile job's
renderer: it formats one :class:`~sbprof.analysis.sweep.SweepSummary`
(analysed once, before) in each format.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Union

from sbprof.analysis.sweep import SweepSummary
from sbprof.report.cells_csv import render_csv
from sbprof.report.sweep_markdown import render_markdown
from sbprof.report.sweep_plot import render_sweep_plots
from sbprof.results.files import atomic_write

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"


def render(summary: SweepSummary, folder: Union[str, Path]) -> Dict[str, Path]:
    """Write ``report.md``, ``results.csv`` and the plots into ``folder``; return their paths."""
    folder = Path(folder)
    plots = render_sweep_plots(summary, folder)
    paths = {"report": folder / REPORT_FILE, "csv": folder / CSV_FILE}
    atomic_write(paths["report"], render_markdown(summary, plots={
        name: str(path.relative_to(folder)) for name, path in plots.items()}))
    atomic_write(paths["csv"], render_csv(summary.records, summary.models))
    return {**paths, **{f"plot {name}": path for name, path in plots.items()}}
