"""Renderers of sweep results: markdown tables, CSV, derived JSON figures.

Renderers never measure. They take :class:`~sbprof.record.Measurement`
records (as stored in ``results.json``) and return text;
:func:`write_reports` writes them next to the results and
:func:`render_results` re-renders an existing ``results.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence, Union

from sbprof.record import Measurement
from sbprof.report.csv import render_csv
from sbprof.report.json import cell_figures
from sbprof.report.markdown import render_markdown

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"


def write_reports(measurements: Sequence[Measurement], folder: Union[str, Path]) -> Dict[str, Path]:
    """Write ``report.md`` and ``results.csv`` into ``folder`` (atomically); return their paths."""
    from sbprof.sweep.store import atomic_write_text

    folder = Path(folder)
    paths = {"report": folder / REPORT_FILE, "csv": folder / CSV_FILE}
    atomic_write_text(paths["report"], render_markdown(measurements))
    atomic_write_text(paths["csv"], render_csv(measurements))
    return paths


def render_results(results: Union[str, Path], folder: Optional[Union[str, Path]] = None) -> Dict[str, Path]:
    """Re-render the reports of a ``results.json`` without measuring anything.

    Arguments
    ---------
    results : str or Path
        A ``results.json`` file, or the folder holding it.
    folder : str or Path, optional
        Where to write the reports (default: next to the results).
    """
    from sbprof.sweep.store import RESULTS_FILE, load_results

    path = Path(results)
    if path.is_dir():
        path = path / RESULTS_FILE
    _, measurements = load_results(path)
    return write_reports(measurements, folder if folder is not None else path.parent)


__all__ = ["cell_figures", "render_csv", "render_markdown", "render_results", "write_reports"]
