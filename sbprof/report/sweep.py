"""A sweep's reports, formatted together: ``report.md``, ``results.csv`` and the plots (``plots/``).

The job registry names :func:`render` as the profile job's renderer: it
formats one :class:`~sbprof.analysis.sweep.SweepSummary` (analysed once,
before) in each format and returns the files' contents;
:mod:`sbprof.jobs.render` writes them.
"""
from __future__ import annotations

from typing import Dict, Union

from sbprof.analysis.sweep import SweepSummary
from sbprof.report.cells_csv import render_csv
from sbprof.report.sweep_markdown import render_markdown
from sbprof.report.sweep_plot import render_sweep_plots

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"


def render(summary: SweepSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md``, ``results.csv`` and one ``plots/sweep-<model>.png`` per model: file name -> content."""
    plots = render_sweep_plots(summary)
    return {REPORT_FILE: render_markdown(summary, plots={name: path for name, (path, _) in plots.items()}),
            CSV_FILE: render_csv(summary.rows),
            **{path: png for path, png in plots.values()}}
