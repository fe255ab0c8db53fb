"""A capacity search analysed: its probes, the streams per machine with the range repeated probes gave, the
worst-case compute budget, state and memory per added stream, and the server's own time per chunk.

Every figure is recomputed from the per-chunk columns each probe keeps (the
definitions are in :mod:`sbprof.analysis.stream` and under the report's
capacity table):

- streams per machine and its range: :func:`~sbprof.analysis.stream_criterion.capacity_range`
  over every probe's verdict (median over runs; the range spans the runs' ranges; none when no count was probed
  twice and there is one run);
- worst-case compute budget (:func:`compute_budget`): ``floor(chunk duration / p99 compute)``, the p99 over
  every chunk served at the capacity (every probe of that count): how many streams would fit if every chunk
  cost the p99 and no idle time absorbed it, whichever other counts the search probed;
- memory per added stream (:func:`memory_slope`): a least-squares slope of each probe's memory growth over its
  stream count, with a 95 % interval, from at least :data:`MIN_COUNTS` stream counts, or not at all;
- the server's own time per chunk (:func:`server_gaps`): what the loop spends between two calls (median, from
  :data:`MIN_GAPS` backlogged chunks).

Pure: no torch, no clocks.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.figures import Outcome
from sbprof.analysis.lsq import fit_linear
from sbprof.analysis.runs import representative
from sbprof.analysis.stream_criterion import (audio_rows, capacity_range, quantile_interval, utilisation,
                                              within_target)
from sbprof.analysis.stream_payload import Columns, payload
from sbprof.analysis.stream_summary import CapacityRow, Probe
from sbprof.base.errors import ConfigError
from sbprof.base.stats import quantile
from sbprof.record import Measurement

MIN_COUNTS = 3
"""Distinct stream counts a memory slope needs: with two, a line goes through any pair and has no interval."""
MIN_GAPS = 20
"""Backlogged chunks the server's own time per chunk needs: with a few only (a search of one or two streams), the
preemptions that land between two calls on a busy machine are most of them."""
MS, US, MB, KB = 1e3, 1e6, 1e6, 1e3


def server_gaps(chunks: Columns) -> List[float]:
    """The server's own time between two calls (s): from a call's end to the next call's start, wherever the next
    chunk had already arrived (the server had no reason to wait): its bookkeeping, and any wait for a core there.

    Example
    -------
    >>> [round(g, 6) for g in server_gaps({"arrival_s": [0.0, 0.0, 0.5], "start_s": [0.0, 0.10002, 0.5],
    ...                                    "end_s": [0.1, 0.2, 0.6]})]
    [2e-05]
    """
    a, s, e = chunks["arrival_s"], chunks["start_s"], chunks["end_s"]
    return [s[i] - e[i - 1] for i in range(1, len(s)) if a[i] <= e[i - 1] and s[i] >= e[i - 1]]


def memory_slope(points: Sequence[Tuple[int, float]]) -> Tuple[Optional[Tuple[float, float, float]], Optional[str]]:
    """The least-squares slope of memory (bytes) over stream counts with its 95 % interval, or why there is none.

    Example
    -------
    >>> slope, why = memory_slope([(1, 100.0), (2, 160.0), (4, 250.0), (4, 240.0)])
    >>> [round(x, 1) for x in slope], why
    ([47.0, 33.1, 60.9], None)
    >>> memory_slope([(1, 100.0), (2, 150.0)])
    (None, '2 stream counts: a slope needs 3')
    """
    counts = len({n for n, _ in points})
    if counts < MIN_COUNTS:
        return None, f"{counts} stream count{'s' if counts != 1 else ''}: a slope needs {MIN_COUNTS}"
    try:
        fit = fit_linear([[1.0, float(n)] for n, _ in points], [float(v) for _, v in points])
    except ConfigError as exc:
        return None, str(exc)
    low, high = fit.coefficient_interval(1) if fit.dof >= 1 and math.isfinite(fit.sigma) else (math.nan, math.nan)
    return (fit.coefficients[1], low, high), None


def compute_budget(compute_s: Sequence[float], chunk_s: float) -> Optional[Tuple[int, int, int]]:
    """``floor(chunk_s / p99)`` of ``compute_s``, with the interval the p99's order statistics give it; ``None``
    when chunks cost nothing (a hand-edited record).

    Example
    -------
    >>> compute_budget([0.08] * 50 + [0.09] * 50, 0.2), compute_budget([0.0] * 10, 0.2)
    ((2, 2, 2), None)
    """
    p99 = quantile(compute_s, 0.99)
    low, high, _ = quantile_interval(compute_s, 0.99)
    if low <= 0:
        return None
    return math.floor(chunk_s / p99), math.floor(chunk_s / high), math.floor(chunk_s / low)


def _memory(probe: Any) -> Optional[float]:
    """A probe's memory: its growth over the memory in use before it; results from before issue 44, the largest
    reading after one of its chunks."""
    if probe.peak_delta_bytes is not None:
        return probe.peak_delta_bytes
    readings = [v for v in probe.chunks.get("memory_bytes", []) if v is not None]
    return max(readings) if readings else None


def probes_of(m: Measurement) -> List[Probe]:
    """The probes a capacity record keeps, in the order they ran, their figures recomputed from the raw columns."""
    extra = payload(m)
    target = float(extra.target_s or extra.chunk_s)
    out = []
    for p in extra.probes:
        cols = p.chunks
        compute = [e - s for s, e in zip(cols["start_s"], cols["end_s"])]
        v = within_target(cols, target, p.unserved_chunks)
        delays = [cols["end_s"][i] - cols["arrival_s"][i] for i in audio_rows(cols)]
        length = max(cols["end_s"], default=0.0)
        out.append(Probe(p.streams, quantile(compute, 0.99) * MS if compute else math.nan,
                         None if v.p99_s is None else v.p99_s * MS, v.slope, utilisation(cols), _memory(p), v.passed,
                         v.unserved, quantile(compute, 0.5) * MS if compute else None,
                         tuple(d * MS for d in quantile_interval(delays, 0.99)[:2]) if delays else None,
                         p.core_wait_s / length if p.core_wait_s is not None and length > 0 else None))
    return out


def _outcomes(probes: Sequence[Probe]) -> Dict[int, List[bool]]:
    out: Dict[int, List[bool]] = {}
    for p in probes:
        out.setdefault(p.streams, []).append(p.passed)
    return out


def _own_us(gaps: Sequence[float]) -> Optional[float]:
    return statistics.median(gaps) * US if len(gaps) >= MIN_GAPS else None


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def capacity_row(runs: Sequence[Measurement], kind: Tuple[str, int, int]) -> CapacityRow:
    """One capacity search (its runs pooled) as the report shows it; ``kind``: (kind, chunk size, left context)."""
    rep = representative(runs)
    _, chunk_size, left = kind
    extra = payload(rep)
    ok = [m for m in runs if m.ok and payload(m).probes]
    base = dict(outcome=Outcome.of(rep), cell=rep.cell, chunk_size=chunk_size, left_context=left, runs=len(ok),
                max_streams=int(rep.cell.params.get("max_streams", 0)), traffic=extra.traffic or "spread",
                chunk_ms=extra.chunk_s * MS if ok else None,
                target_ms=None if extra.target_s is None else extra.target_s * MS)
    if not ok:
        return CapacityRow(**base, capacity=None)
    chunk_s = extra.chunk_s
    per_run = [(m, probes_of(m)) for m in ok]
    ranges = [capacity_range(_outcomes(probes)) for _, probes in per_run]
    found = [r[0] for r in ranges]
    probes = per_run[0][1]
    at = [p for p in probes if p.streams == max(1, found[0])]
    # The budget's p99: every chunk served at each run's capacity (one stream when none passed).
    compute = [e - s for (m, _), n in zip(per_run, found) for p in payload(m).probes if p.streams == max(1, n)
               for s, e in zip(p.chunks["start_s"], p.chunks["end_s"])]
    budget = compute_budget(compute, chunk_s) if compute else None
    slope, why = memory_slope([(p.streams, p.memory_bytes) for _, run in per_run for p in run
                               if p.memory_bytes is not None])
    firsts = {p.streams: p for p in reversed(probes)}  # each count's first probe
    lone, busiest = firsts.get(1), max((p for p in firsts.values() if p.passed), key=lambda p: p.streams,
                                       default=None)
    states = [v for m in ok for v in payload(m).state_bytes.values()]
    views = [v for m in ok for v in payload(m).state_view_bytes.values()]
    repeated = len(found) > 1 or any(len(r) > 1 for _, run in per_run for r in _outcomes(run).values())
    return CapacityRow(
        **base, capacity=statistics.median(found), probes=probes, found=found,
        capacity_low=min(r[1] for r in ranges) if repeated else None,
        capacity_high=max(r[2] for r in ranges) if repeated else None,
        budget=None if budget is None else budget[0], budget_low=None if budget is None else budget[1],
        budget_high=None if budget is None else budget[2],
        p99_compute_ms=quantile(compute, 0.99) * MS if compute else None,
        delay_p99_ms=_median([p.delay_p99_ms for p in at]), waited_share=_median([p.waited_share for p in at]),
        state_kb=None if not states else statistics.median(states) / KB,
        state_view_kb=None if not views else statistics.median(views) / KB,
        marginal_mb=None if slope is None else tuple(x / MB for x in slope), marginal_why=why,
        own_us=_own_us([g for p in payload(ok[0]).probes for g in server_gaps(p.chunks)]),
        lone_ratio=(lone.compute_p50_ms / busiest.compute_p50_ms
                    if lone and busiest and busiest.streams > 1 and busiest.compute_p50_ms else None))
