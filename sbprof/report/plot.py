"""PNG plots of series (comparisons, merged machines) and what every sbprof plot shares (matplotlib's Agg canvas).

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas, never
through pyplot: no global backend is switched and no figure outlives its
call, so importing sbprof changes nothing in a user's plotting session.
Each ``*_figure`` function returns the figure (tests read its lines, labels
and scales); :func:`png_bytes` turns one into the PNG a renderer returns
(:mod:`sbprof.jobs.render` writes the files).

Log axes where they help: an axis is logarithmic when all its values are
positive and span at least :data:`LOG_SPAN` times (a power law is then a
straight line whose slope is its exponent), linear otherwise.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from sbprof.analysis.series import VARIED, Crossover, Series

LOG_SPAN = 8.0
LEGEND_ROW_IN = 0.2
PLOT_DIR = "plots"
MS = 1e3
MB_PER_GB = 1e3


def axis_scale(values: Sequence[float]) -> str:
    """``log`` when every value is positive and they span at least :data:`LOG_SPAN` times, else ``linear``.

    Example
    -------
    >>> axis_scale([1, 2, 4, 8, 16]), axis_scale([1, 2, 4]), axis_scale([0, 10, 100])
    ('log', 'linear', 'linear')
    """
    values = [v for v in values if v is not None]
    if not values or min(values) <= 0:
        return "linear"
    return "log" if max(values) / min(values) >= LOG_SPAN else "linear"


def png_bytes(figure: Figure) -> bytes:
    """The PNG of ``figure``, rendered in memory.

    Example
    -------
    >>> png_bytes(new_figure()[0])[:4]
    b'\\x89PNG'
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def set_scales(ax, xs: Sequence[float], ys: Sequence[float]) -> None:
    """Log or linear per axis (see :func:`axis_scale`), ticks written as plain numbers (``20``, not ``2x10^1``)."""
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axis, values, set_scale in ((ax.xaxis, xs, ax.set_xscale), (ax.yaxis, ys, ax.set_yscale)):
        scale = axis_scale(values)
        set_scale(scale)
        axis.set_major_formatter(plain)
        if scale == "log" and max(values) / min(values) < 100:  # few decades: label the minor ticks too
            axis.set_minor_formatter(plain)


def new_figure(panels: int = 1, extra_rows: int = 0) -> Tuple[Figure, List]:
    """A figure of ``panels`` axes side by side, taller by the legend rows placed below them."""
    figure = Figure(figsize=(7.5 * panels, 4.8 + LEGEND_ROW_IN * extra_rows), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, [figure.add_subplot(1, panels, i + 1) for i in range(panels)]


def legend_below(ax, columns: int = 2) -> None:
    """The legend under the axes, so it never hides a line."""
    ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=columns, frameon=False)


def finish_axes(ax, xs: Sequence[float], ys: Sequence[float], xlabel: str, ylabel: str, columns: int = 2) -> None:
    """Scales fitted to the values plotted, both labels, a light grid and the legend below: every panel alike."""
    set_scales(ax, xs, ys)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    legend_below(ax, columns)


def legend_rows(lines: Sequence["Line"], fits: bool) -> int:
    """Rows of a two-column legend: each line, plus its fit's entry when drawn."""
    entries = sum(1 + (fits and line.series.growth is not None) for line in lines)
    return -(-entries // 2)


@dataclass(frozen=True)
class Line:
    """One series to draw, with its legend label and style."""

    label: str
    series: Series
    color: str
    linestyle: str = "-"


def growth_label(s: Series) -> str:
    """The variant's legend text: parameters and the fitted exponent with its interval.

    Example
    -------
    >>> growth_label(Series("beam1", "m", 2_500_000, (), (), None, None))
    'beam1 (2.50 M params)'
    """
    text = s.variant + (f" ({s.params / 1e6:.2f} M params)" if s.params else "")
    if s.power is not None:
        b = s.power.coefficients[1]
        interval = s.power.exponent_interval
        text += f": b = {b:.2f}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
    return text


def latency_figure(lines: Sequence[Line], vary: str, crossings: Sequence[Crossover] = (), title: str = "") -> Figure:
    """Latency per call versus the varied size: per line the median (markers), the pooled quartiles (band),
    the smallest and largest run median (error bars, with several runs) and the fitted growth law (dashed);
    each crossing of two fitted laws is a dotted vertical line labelled ``faster below | faster above``."""
    figure, (ax,) = new_figure(extra_rows=legend_rows(lines, fits=True))
    xs_all, ys_all = [], []
    for line in lines:
        s = line.series
        xs = [p.x for p in s.points]
        med = [p.median_s * MS for p in s.points]
        ax.plot(xs, med, marker="o", color=line.color, linestyle=line.linestyle, label=line.label)
        ax.fill_between(xs, [p.q1_s * MS for p in s.points], [p.q3_s * MS for p in s.points], color=line.color,
                        alpha=0.18, linewidth=0)
        if any(p.runs > 1 for p in s.points):
            ax.errorbar(xs, med, yerr=[[m - p.run_min_s * MS for m, p in zip(med, s.points)],
                                       [p.run_max_s * MS - m for m, p in zip(med, s.points)]],
                        fmt="none", ecolor=line.color, capsize=3, linewidth=1)
        if s.growth is not None:
            best = s.growth.best
            grid = np.geomspace(best.n_min, best.n_max, 64)
            ax.plot(grid, [best.predict(x) * MS for x in grid], linestyle="--", linewidth=1, color=line.color,
                    label=f"{s.variant} fit ({best.form}): {best.formula()} s")
        xs_all += xs
        ys_all += [p.q1_s * MS for p in s.points] + [p.q3_s * MS for p in s.points] + med
    for c in crossings:
        ax.axvline(c.at, linestyle=":", color="0.4", linewidth=1)
        ax.annotate(f"{c.faster_below} | {c.faster_above}", (c.at, 0.99), xycoords=("data", "axes fraction"),
                    xytext=(2, 0), textcoords="offset points", rotation=90, ha="left", va="top",
                    fontsize="xx-small", color="0.3")
    finish_axes(ax, xs_all, ys_all, VARIED.get(vary, vary), "latency per call (ms): median, band = quartiles")
    ax.set_title(title or f"Latency versus {VARIED.get(vary, vary)}", fontsize="medium")
    return figure


def memory_figure(lines: Sequence[Line], vary: str, title: str = "") -> Figure:
    """Memory one call adds (MB, median over runs) versus the varied size, one line per series."""
    figure, (ax,) = new_figure(extra_rows=legend_rows(lines, fits=False))
    xs_all, ys_all = [], []
    for line in lines:
        pts = [p for p in line.series.points if p.batch_memory_gb is not None]
        xs, ys = [p.x for p in pts], [p.batch_memory_gb * MB_PER_GB for p in pts]
        ax.plot(xs, ys, marker="o", color=line.color, linestyle=line.linestyle, label=line.label)
        xs_all += xs
        ys_all += ys
    finish_axes(ax, xs_all, ys_all, VARIED.get(vary, vary), "memory one call adds (MB)")
    ax.set_title(title or f"Memory versus {VARIED.get(vary, vary)}", fontsize="medium")
    return figure


def render_series_plots(lines: Sequence[Line], vary: str, crossings: Sequence[Crossover], title: str,
                        prefix: str = "") -> Dict[str, Tuple[str, bytes]]:
    """The latency and memory plots of series: ``{"latency": ("plots/<prefix>latency.png", png), "memory": ...}``."""
    return {"latency": (f"{PLOT_DIR}/{prefix}latency.png",
                        png_bytes(latency_figure(lines, vary, crossings, f"Latency: {title}"))),
            "memory": (f"{PLOT_DIR}/{prefix}memory.png", png_bytes(memory_figure(lines, vary, f"Memory: {title}")))}


def without_fit(s: Series) -> Series:
    """The series without its fitted law (several machines on one axis: no fit drawn)."""
    return Series(s.variant, s.model, s.params, s.points, s.failures, None, s.power, s.growth_note)
