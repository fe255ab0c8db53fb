"""A single-queue streaming server simulated from ``docs/stream.md``'s description alone (not from sbprof's code):
the ground truth of the stream job's capacity, in ``tests/stream/test_stream_capacity.py`` and
``benchmarks/stream_capacity.py``.

Spread traffic: stream i at i/n of a chunk, floor(i M / n) chunks into its utterance of M chunks when the window
opens, a fresh utterance right after each, over the utterance plus (n - 1)/n of a chunk. One server,
first come first served, no time of its own between calls. A count passes when the p99 delay (linear
interpolation) is within the target and the least-squares slope of delay against arrival is at most 0.05 s per s.
"""
from __future__ import annotations

import math
import statistics
from typing import Callable, List, Optional, Tuple

BEHIND = 0.05
"""The delay growth (s per s) past which the server is behind (the documented threshold)."""


def arrivals(streams: int, chunks: int, chunk_s: float, utterance_s: Optional[float] = None,
             flush: int = 0) -> List[Tuple[float, int, int, bool]]:
    """(arrival, session, call number, holds audio) of every chunk of spread traffic, in arrival order.

    An utterance of ``utterance_s`` (``chunks`` x ``chunk_s`` unless told) is cut into ``chunks`` chunks, the last
    one short when it does not divide; chunk k is complete when its last sample is spoken, at the earlier of
    (k + 1) chunks and the utterance's end, and ``flush`` chunks follow with the utterance's last sample.
    """
    utterance = chunks * chunk_s if utterance_s is None else utterance_s
    window = utterance + (streams - 1) * chunk_s / streams + 1e-9
    out, later = [], streams
    for i in range(streams):
        first = i * chunks // streams
        start = i * chunk_s / streams - first * chunk_s  # where this stream's first utterance would have begun
        session = i
        while True:
            calls = 0
            for k in range(first, chunks):
                if start + min((k + 1) * chunk_s, utterance) > window:
                    break
                out.append((start + min((k + 1) * chunk_s, utterance), session, calls, True))
                calls += 1
            start += utterance
            if start <= window:
                out += [(start, session, calls + j, False) for j in range(flush)]
            first = 0
            if start + chunk_s > window:
                break
            session, later = later, later + 1
    return sorted(out)


def quantile(values: List[float], q: float) -> float:
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def simulate(streams: int, chunks: int, chunk_s: float, cost_s: Callable[[int], float], target_s: float,
             utterance_s: Optional[float] = None, flush: int = 0) -> bool:
    """Whether one server, first come first served, keeps ``streams`` streams within the target; the k-th call of
    a session costs ``cost_s(k)``; the delays judged are those of the chunks that hold audio."""
    free, delays, times = 0.0, [], []
    for arrival, _, k, audio in arrivals(streams, chunks, chunk_s, utterance_s, flush):
        free = max(free, arrival) + cost_s(k)
        if audio:
            delays.append(free - arrival)
            times.append(arrival)
    mt, md = statistics.mean(times), statistics.mean(delays)
    slope = sum((t - mt) * (d - md) for t, d in zip(times, delays)) / sum((t - mt) ** 2 for t in times)
    return quantile(delays, 0.99) <= target_s and slope <= BEHIND


def simulated_capacity(max_streams: int, chunks: int, chunk_s: float, cost_s: Callable[[int], float],
                       utterance_s: Optional[float] = None, flush: int = 0) -> int:
    """The largest stream count below the first that fails (the target: one chunk duration)."""
    return next((n - 1 for n in range(1, max_streams + 1)
                 if not simulate(n, chunks, chunk_s, cost_s, chunk_s, utterance_s, flush)), max_streams)
