"""PNG plots of a stream job (format a summary; never measure): the trade-off, latency CDFs, delay against streams.

- ``plots/stream-tradeoff-<setting>.png``: per chunk size and left context
  (the cells with the fewest streams), the latency a user feels
  (algorithmic latency + p99 steady delay) against the compute cost per
  second of audio (streaming RTF);
- ``plots/stream-cdf-<setting>.png``: per chunk size and left context (the
  cells with the fewest streams), the distribution of chunk compute latency
  (left) and of the delay under real-time pacing (right);
- ``plots/stream-streams-<setting>.png``: the first capacity search's probes:
  p99 delay against stream count with the delay target (left), and
  utilisation (right).

Built like every sbprof plot (:mod:`sbprof.report.plot`).
"""
from __future__ import annotations

from typing import Dict, Optional

from matplotlib.figure import Figure

from sbprof.analysis.stream_summary import StreamSetting, StreamSummary
from sbprof.report.format import plural
from sbprof.report.plot import PLOT_DIR, finish_axes, new_figure, png_bytes


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
    """The capacity probes: p99 delay against stream count with the delay target, and utilisation."""
    cap = s.capacity
    if cap is None or not cap.probes or cap.chunk_ms is None:
        return None
    figure, (delay_ax, busy_ax) = new_figure(2, extra_rows=1)
    probes = sorted((p for p in cap.probes if p.delay_p99_ms is not None), key=lambda p: p.streams)
    ns = [p.streams for p in probes]
    target = cap.target_ms or cap.chunk_ms
    # Points, not a line: the counts at the boundary are probed several times.
    delay_ax.plot(ns, [p.delay_p99_ms for p in probes], marker="o", linestyle="none", color="C1",
                  label="p99 delay of a probe")
    for p in probes:
        if p.behind:
            delay_ax.annotate("behind", (p.streams, p.delay_p99_ms), fontsize="x-small")
    delay_ax.axhline(target, linestyle="--", color="0.3", label=f"delay target ({target:.0f} ms)")
    busy = [p for p in probes if p.utilisation is not None]
    busy_ax.plot([p.streams for p in busy], [p.utilisation for p in busy], marker="o", linestyle="none",
                 label="utilisation")
    busy_ax.axhline(1.0, linestyle="--", color="0.3", label="busy all the time")
    finish_axes(delay_ax, ns, [p.delay_p99_ms for p in probes] + [target], "concurrent streams in one process",
                "p99 delay under real-time pacing (ms)", columns=1)
    finish_axes(busy_ax, ns, [p.utilisation for p in busy] + [1.0], "concurrent streams in one process",
                "utilisation (compute / session length)", columns=1)
    figure.suptitle(title, fontsize="medium")
    return figure


def tradeoff_figure(s: StreamSetting, title: str) -> Optional[Figure]:
    """User-felt latency (algorithmic + p99 steady delay) against compute per audio second, per chunk setting."""
    rows = [r for r in s.rows if r.streaming_rtf and r.felt_ms is not None]
    if not rows:
        return None
    fewest = min(r.streams for r in rows)
    rows = [r for r in rows if r.streams == fewest]
    figure, (ax,) = new_figure(1, extra_rows=-(-len(rows) // 2))
    lefts = sorted({r.left_context for r in rows}, key=lambda x: (x == -1, x))
    xs, ys = [], []
    for i, left in enumerate(lefts):
        kept = sorted((r for r in rows if r.left_context == left), key=lambda r: r.chunk_size)
        x = [r.streaming_rtf for r in kept]
        y = [r.felt_ms for r in kept]
        ax.plot(x, y, marker="o", color=f"C{i % 10}", label=f"left {'unlimited' if left == -1 else left}")
        for r, xi, yi in zip(kept, x, y):
            ax.annotate(f"chunk {r.chunk_size}", (xi, yi), fontsize="x-small", xytext=(3, 3),
                        textcoords="offset points")
        xs += x
        ys += y
    finish_axes(ax, xs, ys, "compute per second of audio (streaming RTF)",
                "latency felt: algorithmic + p99 delay (ms)")
    figure.suptitle(f"{title} ({fewest} stream{'s' if fewest > 1 else ''})", fontsize="medium")
    return figure


def plot_file(kind: str, s: StreamSetting) -> str:
    """``plots/stream-<kind>-<setting>.png``: where a setting's plot goes, relative to the results folder."""
    return f"{PLOT_DIR}/stream-{kind}-{s.name}.png"


def render_stream_plots(summary: StreamSummary) -> Dict[str, bytes]:
    """The PNGs of every setting: file name (:func:`plot_file`) -> PNG bytes."""
    out: Dict[str, bytes] = {}
    for s in summary.settings:
        where = setting_label(s)
        cap = s.capacity
        left = "" if cap is None else ("unlimited" if cap.left_context == -1 else str(cap.left_context))
        figures = {"tradeoff": tradeoff_figure(s, f"{summary.model}, {where}: latency against compute cost"),
                   "cdf": cdf_figure(s, f"{summary.model}, {where}: latency distributions"),
                   "streams": streams_figure(s, f"{summary.model}, {where}: chunk {cap.chunk_size if cap else ''}, "
                                                f"left {left}: p99 delay against streams")}
        for kind, figure in figures.items():
            if figure is not None:
                out[plot_file(kind, s)] = png_bytes(figure)
    return out
