"""PNG plots of a sweep: RTF and memory one batch adds versus audio length (formats a summary; never measures).

One figure per model: a line per (setting, batch size); the RTF panel's band
is the interval the RTF table prints (run-to-run for cells measured in
several runs, the batch quartiles for a cell measured once), so the plot and
the table never disagree. Built like every sbprof plot (:mod:`sbprof.report.plot`).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional, Tuple

from matplotlib.figure import Figure

from sbprof.analysis.sweep import SweepModel, SweepSummary
from sbprof.report.plot import PLOT_DIR, finish_axes, new_figure, png_bytes

LINE_STYLES = ["-", "--", ":", "-."]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "model"


def sweep_figure(model: SweepModel, title: str) -> Optional[Figure]:
    """RTF (left) and memory one batch adds (right) versus audio length, one line per (setting, batch size)."""
    if not model.plot:
        return None
    batches = sorted({line.batch_size for line in model.plot})
    settings = list(dict.fromkeys((line.device, line.threads) for line in model.plot))
    figure, (rtf_ax, mem_ax) = new_figure(2, extra_rows=-(-len(model.plot) // 2))
    xs_all, rtf_all, mem_all = [], [], []
    for line in model.plot:
        style = dict(color=f"C{batches.index(line.batch_size) % 10}",
                     linestyle=LINE_STYLES[settings.index((line.device, line.threads)) % len(LINE_STYLES)])
        label = f"{line.device} {line.threads}t, batch {line.batch_size}"
        rtf_ax.plot(line.xs, line.median, marker="o", label=label, **style)
        rtf_ax.fill_between(line.xs, line.low, line.high, color=style["color"], alpha=0.15, linewidth=0)
        mem_x = [x for x, v in zip(line.xs, line.added_mb) if v is not None]
        mem_y = [v for v in line.added_mb if v is not None]
        mem_ax.plot(mem_x, mem_y, marker="o", label=label, **style)
        xs_all += line.xs
        rtf_all += line.low + line.high + line.median
        mem_all += mem_y
    for ax, ys, ylabel in ((rtf_ax, rtf_all, "RTF (median over runs; band = the table's interval)"),
                           (mem_ax, mem_all, "memory one batch adds (MB)")):
        finish_axes(ax, xs_all, ys, "seconds of audio per utterance", ylabel)
    figure.suptitle(title, fontsize="medium")
    return figure


def render_sweep_plots(summary: SweepSummary) -> Dict[str, Tuple[str, bytes]]:
    """One PNG per model with measured cells: model name (as the headings) -> (``plots/sweep-<model>.png``, png)."""
    out = {}
    for model in summary.models:
        figure = sweep_figure(model, f"{model.name}: RTF and memory versus audio length")
        if figure is not None:
            out[model.name] = (f"{PLOT_DIR}/sweep-{_slug(Path(model.name).name)}.png", png_bytes(figure))
    return out
