"""The plot of ``sbprof run --vary``: each variant's throughput, the median over its runs with its interval.

Draws the :class:`~sbprof.analysis.vary.VaryReport` (computed before): one bar per measured variant, base
first, its error bar the interval over runs; the winner and the variants whose loss changed are marked in the
labels. Nothing is computed here.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from sbprof.analysis.vary import FIGURES, VaryReport
from sbprof.report.plot import PLOT_DIR, new_figure, png_bytes

VARY_PLOT = f"{PLOT_DIR}/vary-throughput.png"
"""The plot's path in the output folder."""


def vary_figure(report: VaryReport) -> Figure:
    """Throughput per variant (median over runs, interval as the error bar), base first."""
    figure, (ax,) = new_figure()
    shown = [v for v in report.variants if report.throughput in v.figures]
    medians = [v.figures[report.throughput].over_runs.median for v in shown]
    lows = [m - v.figures[report.throughput].over_runs.low for m, v in zip(medians, shown)]
    highs = [v.figures[report.throughput].over_runs.high - m for m, v in zip(medians, shown)]
    colours = ["tab:gray" if v is report.variants[0] else "tab:green" if v.name == report.winner
               else "tab:red" if not v.loss_ok else "tab:blue" for v in shown]
    ax.bar(range(len(shown)), medians, yerr=[lows, highs], capsize=6, color=colours)
    labels = [v.name + (" (base)" if v is report.variants[0] else " (winner)" if v.name == report.winner
                        else " (loss changed)" if not v.loss_ok else "") for v in shown]
    ax.set_xticks(range(len(shown)), labels, rotation=20, ha="right")
    ax.set_ylabel(FIGURES[report.throughput][0])
    level = 100 * report.runs_confidence()
    ax.set_title(f"Throughput per variant, stage {report.stage} (median over runs, ~{level:.0f} % interval)",
                 fontsize=10)
    ax.set_ylim(bottom=0)
    return figure


def render_vary_plot(report: VaryReport) -> dict:
    """``{VARY_PLOT: png}``, or nothing when no variant has a throughput to draw."""
    if not any(report.throughput in v.figures for v in report.variants):
        return {}
    return {VARY_PLOT: png_bytes(vary_figure(report))}
