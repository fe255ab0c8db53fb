"""The capacity criterion of a stream job, shared by the worker's capacity search and the analysis.

From one session's per-chunk columns: the delay of the chunks that hold audio, its p99 and its growth
(:func:`delay_slope`), the verdict against a delay target (:func:`within_target`, :class:`Verdict`), the
server's busy share and the capacity it suggests, the worst-case compute budget (:func:`budget_margin`), and
distribution-free intervals for a quantile of the chunks (:func:`quantile_interval`, :func:`median_interval`).
The definitions are in :mod:`sbprof.analysis.stream`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.base.stats import quantile

BEHIND_SLOPE = 0.05
"""Delay growth (seconds of delay per second of session) above which a server is *behind*: its backlog grows
(0.05: 50 ms more delay per second of speech, 3 s per minute)."""


def budget_margin(compute_s: Sequence[float], streams: int, chunk_s: float) -> float:
    """Chunk duration / (streams x p99 compute): the worst-case compute budget (>= 1: fits even if every chunk
    cost the p99 and none overlapped idle time). Not the capacity criterion.

    Example
    -------
    >>> budget_margin([0.02] * 100, 1, 0.32), budget_margin([0.08] * 100, 2, 0.32)
    (16.0, 2.0)
    """
    return chunk_s / (streams * quantile(compute_s, 0.99))


def delay_slope(arrival_s: Sequence[float], delay_s: Sequence[float]) -> Optional[float]:
    """Least-squares slope of delay against arrival (seconds per second); ``None`` with fewer than 3 chunks.

    Example
    -------
    >>> delay_slope([1, 2, 3, 4], [0.1, 0.3, 0.5, 0.7])
    0.2
    """
    n = len(arrival_s)
    if n < 3:
        return None
    mx, my = sum(arrival_s) / n, sum(delay_s) / n
    sxx = sum((x - mx) ** 2 for x in arrival_s)
    if sxx <= 0:
        return None
    return round(sum((x - mx) * (y - my) for x, y in zip(arrival_s, delay_s)) / sxx, 12)


@dataclass(frozen=True)
class Verdict:
    """A session against the capacity criterion: p99 delay (s), delay growth (s/s), unserved chunks, passed."""

    p99_s: Optional[float]
    slope: Optional[float]
    unserved: int
    target_s: float
    passed: bool

    @property
    def behind(self) -> bool:
        return self.unserved > 0 or (self.slope is not None and self.slope > BEHIND_SLOPE)


def audio_rows(chunks: Dict[str, List[Any]]) -> List[int]:
    """The rows of the chunks that hold audio (not flush chunks)."""
    return [i for i, n in enumerate(chunks["samples"]) if n > 0]


def within_target(chunks: Dict[str, List[Any]], target_s: float, unserved: int = 0) -> Verdict:
    """The capacity criterion (see :mod:`sbprof.analysis.stream`) on one session's columns.

    Example
    -------
    >>> cols = {"samples": [10, 10, 10, 0], "arrival_s": [1, 2, 3, 3], "end_s": [1.1, 2.1, 3.1, 3.2]}
    >>> v = within_target(cols, 0.2); (round(v.p99_s, 3), v.slope, v.passed)
    (0.1, 0.0, True)
    >>> within_target({"samples": [10] * 4, "arrival_s": [1, 2, 3, 4], "end_s": [1.1, 2.3, 3.5, 4.7]}, 1.0).behind
    True
    """
    rows = audio_rows(chunks)
    arrival = [chunks["arrival_s"][i] for i in rows]
    delays = [chunks["end_s"][i] - chunks["arrival_s"][i] for i in rows]
    p99 = quantile(delays, 0.99) if delays else None
    slope = delay_slope(arrival, delays)
    v = Verdict(p99, slope, unserved, target_s, False)
    return Verdict(p99, slope, unserved, target_s,
                   passed=p99 is not None and p99 <= target_s and not v.behind)


def utilisation(chunks: Dict[str, List[Any]]) -> Optional[float]:
    """Compute / the session's length (from its start to its last output): the server's busy share."""
    ends = chunks["end_s"]
    if not ends or max(ends) <= 0:
        return None
    return sum(e - s for s, e in zip(chunks["start_s"], ends)) / max(ends)


def capacity_estimate(chunks: Dict[str, List[Any]], streams: int) -> Optional[int]:
    """``floor(streams / utilisation)``: the stream count that would keep the server busy all the time."""
    u = utilisation(chunks)
    return None if not u else int(math.floor(streams / u))


def capacity_range(outcomes: Dict[int, Sequence[bool]]) -> Tuple[int, int, int]:
    """Streams per machine from every probe's verdict, and the range the boundary moved over: ``(capacity, low,
    high)``.

    *capacity*: the largest stream count at which at least half of the probes passed (0 when none). *low*: one
    below the smallest count at which any probe failed (every probe below it passed); *high*: the largest count
    at which any probe passed. On a quiet machine repeated probes agree and ``low == capacity == high``; load
    that comes and goes makes a count pass once and fail once, and the range says over how many streams.

    Example
    -------
    >>> capacity_range({1: [True], 13: [False], 9: [True, True, True], 10: [False, False, False]})
    (9, 9, 9)
    >>> capacity_range({1: [True], 9: [True, False, True], 10: [False, True, False], 11: [False]})
    (9, 8, 10)
    >>> capacity_range({1: [False, False]}), capacity_range({1: [True], 2: [True]})
    ((0, 0, 0), (2, 2, 2))
    """
    found = max((n for n, r in outcomes.items() if 2 * sum(r) >= len(r)), default=0)
    failed = [n for n, r in outcomes.items() if not all(r)]
    low = min(found, min(failed) - 1) if failed else found
    high = max([found] + [n for n, r in outcomes.items() if any(r)])
    return found, max(0, low), high


def quantile_interval(samples: Sequence[float], q: float, z: float = 1.96) -> Tuple[float, float, bool]:
    """A distribution-free ~95 % interval for the ``q`` quantile from order statistics (normal approximation to
    the binomial): ``(low, high, open)``; ``open`` when too few samples bound it above (``high`` is then the
    largest sample, and the true quantile may lie beyond).

    Example
    -------
    >>> quantile_interval(list(range(1, 1001)), 0.99)
    (983, 998, False)
    >>> quantile_interval(list(range(1, 42)), 0.99)
    (39, 41, True)
    """
    xs = sorted(samples)
    n = len(xs)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(1, int(math.floor(n * q - half)))
    hi = int(math.ceil(n * q + half)) + 1
    return xs[lo - 1], xs[min(hi, n) - 1], hi > n


def median_interval(values: Sequence[float]) -> Tuple[float, float, float]:
    """Median and a distribution-free ~95 % interval for it (order statistics, normal approximation to the
    binomial; ``[min, max]`` when too few values bound it).

    Example
    -------
    >>> median_interval(list(range(1, 101)))
    (50.5, 40, 61)
    """
    low, high, _ = quantile_interval(values, 0.5)
    return statistics.median(values), low, high
