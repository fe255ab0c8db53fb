"""PNG plots of a stream job (format a summary; never measure): latency CDFs and p99 latency against stream count.

- ``plots/stream-cdf-<setting>.png``: per chunk size and left context (the
  cells with the fewest streams), the distribution of chunk compute latency
  (left) and of the delay under real-time pacing (right);
- ``plots/stream-streams-<setting>.png``: the capacity probes' p99 compute
  against stream count with the real-time limit (chunk duration / streams),
  and their p99 delay with the chunk duration.

Built like every sbprof plot (:mod:`sbprof.report.plot`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Union

from matplotlib.figure import Figure

from sbprof.analysis.stream import StreamSetting, StreamSummary
from sbprof.report.format import plural
from sbprof.report.plot import PLOT_DIR, finish_axes, new_figure, write_png


def setting_label(s: StreamSetting) -> str:
    """``cpu, 1 thread``: how the report names a setting."""
    return f"{s.device}, {plural(s.threads, 'thread')}"


def cdf_figure(s: StreamSetting, title: str) -> Optional[Figure]:
    """Compute latency and pacing delay CDFs, one line per (chunk size, left context) at the fewest streams."""
    rows = [r for r in s.rows if r.compute_sorted_ms]
    if not rows:
        return None
    fewest = min(r.streams for r in rows)
    rows = [r for r in rows if r.streams == fewest]
    figure, (compute_ax, delay_ax) = new_figure(2, extra_rows=-(-len(rows) // 2))
    for ax, attr, xlabel in ((compute_ax, "compute_sorted_ms", "chunk compute latency (ms)"),
                             (delay_ax, "delay_sorted_ms", "delay from a chunk's last sample to its output (ms)")):
        xs_all = []
        for i, r in enumerate(rows):
            xs = getattr(r, attr)
            left = "unlimited" if r.left_context == -1 else r.left_context
            ax.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", color=f"C{i % 10}",
                    label=f"chunk {r.chunk_size} ({r.chunk_ms:.0f} ms), left {left}")
            xs_all += xs
        finish_axes(ax, xs_all, [1.0], xlabel, "fraction of chunks at or below")
    figure.suptitle(f"{title} ({fewest} stream{'s' if fewest > 1 else ''})", fontsize="medium")
    return figure


def streams_figure(s: StreamSetting, title: str) -> Optional[Figure]:
    """p99 compute and p99 delay of the capacity probes against stream count, with the real-time lines."""
    cap = s.capacity
    if cap is None or not cap.probes or cap.chunk_ms is None:
        return None
    figure, (compute_ax, delay_ax) = new_figure(2, extra_rows=1)
    ns = [p.streams for p in cap.probes]
    grid = list(range(1, max(ns) + 1))
    compute_ax.plot(ns, [p.p99_ms for p in cap.probes], marker="o", label="p99 chunk compute")
    compute_ax.plot(grid, [cap.chunk_ms / n for n in grid], linestyle="--", color="0.3",
                    label=f"real-time limit: chunk duration / streams ({cap.chunk_ms:.0f} ms / n)")
    delay_ax.plot(ns, [p.delay_p99_ms for p in cap.probes], marker="o", color="C1", label="p99 delay")
    delay_ax.axhline(cap.chunk_ms, linestyle="--", color="0.3", label=f"one chunk duration ({cap.chunk_ms:.0f} ms)")
    for ax, ys, ylabel in ((compute_ax, [p.p99_ms for p in cap.probes] + [cap.chunk_ms / max(ns), cap.chunk_ms],
                            "p99 chunk compute latency (ms)"),
                           (delay_ax, [p.delay_p99_ms for p in cap.probes] + [cap.chunk_ms],
                            "p99 delay under real-time pacing (ms)")):
        finish_axes(ax, ns, ys, "concurrent streams in one process", ylabel, columns=1)
    figure.suptitle(title, fontsize="medium")
    return figure


def render_stream_plots(summary: StreamSummary, folder: Union[str, Path]) -> Dict[str, Path]:
    """The PNGs of every setting; returns ``"<kind> <setting>"`` -> path."""
    out: Dict[str, Path] = {}
    for s in summary.settings:
        where = setting_label(s)
        cap = s.capacity
        left = "" if cap is None else ("unlimited" if cap.left_context == -1 else str(cap.left_context))
        figures = {"cdf": cdf_figure(s, f"{summary.model}, {where}: latency distributions"),
                   "streams": streams_figure(s, f"{summary.model}, {where}: chunk {cap.chunk_size if cap else ''}, "
                                                f"left {left}: p99 latency against streams")}
        for kind, figure in figures.items():
            if figure is not None:
                out[f"{kind} {s.name}"] = write_png(figure, Path(folder) / PLOT_DIR / f"stream-{kind}-{s.name}.png")
    return out
