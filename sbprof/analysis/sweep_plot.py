"""The lines of a sweep's plot: per (setting, batch size), the RTF per audio length, its band and added memory."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.figures import batch_audio_seconds, setting_sort_key
from sbprof.analysis.runs import median_over_runs, rtf_over_runs, spread_priors, worker_group
from sbprof.base.stats import summarise
from sbprof.record import Measurement


@dataclass(frozen=True)
class PlotLine:
    """One (setting, batch size) line of a sweep's plot: per audio length, the RTF and the band of its interval.

    The band is the run-to-run interval the table prints for cells measured in
    several runs, and the within-run quartiles of a cell measured once.
    """

    device: str
    threads: int
    batch_size: int
    xs: List[float]
    median: List[float]
    low: List[float]
    high: List[float]
    added_mb: List[Optional[float]]



def plot_lines(records: Sequence[Measurement]) -> List[PlotLine]:
    """The plot's lines of one model's records, in the order of their settings, then batch sizes."""
    lines: Dict[Tuple[str, int, int], Dict[float, List[Measurement]]] = {}
    for m in records:
        if m.ok and m.wall_s and m.audio_seconds:
            lines.setdefault((m.cell.device, m.cell.threads, m.cell.batch_size), {}).setdefault(
                float(m.cell.audio_s), []).append(m)
    priors = spread_priors(records)
    out = []
    for (device, threads, batch), by_x in sorted(lines.items(), key=lambda kv: setting_sort_key(*kv[0][:2])
                                                 + (kv[0][2],)):
        xs, med, low, high, added = [], [], [], [], []
        for x in sorted(by_x):
            runs = by_x[x]
            summary = rtf_over_runs(runs, prior=priors[worker_group(runs[0])])
            if len(runs) > 1:
                lo, hi = summary.interval.low, summary.interval.high
            else:
                one = summarise([w / batch_audio_seconds(runs[0]) for w in runs[0].wall_s])
                lo, hi = one.q1, one.q3
            key = "peak_cuda_delta_bytes" if device.startswith("cuda") else "peak_rss_delta_bytes"
            value = median_over_runs(runs, lambda m: getattr(m.memory, key) if m.memory else None)
            xs.append(x)
            med.append(summary.interval.median)
            low.append(lo)
            high.append(hi)
            added.append(None if value is None else value / 1e6)
        out.append(PlotLine(device, threads, batch, xs, med, low, high, added))
    return out
