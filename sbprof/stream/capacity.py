"""The capacity search: the largest number of concurrent streams that stays real time, found by bisection.

A probe serves ``n`` streams (:mod:`sbprof.stream.session`) and is real time
when every chunk was served and its margin, chunk duration / (``n`` x p99
chunk compute), is at least 1 (:func:`sbprof.analysis.stream.real_time`: the
same definition as the latency tables). Real time is taken to fall as
streams are added. The search keeps the bracket ``lo`` (largest real-time
count probed) < capacity + 1 <= ``hi`` (smallest failing count) and probes
inside it until ``hi = lo + 1``:

1. probe 1 stream;
2. then the last probe's own estimate, ``floor(n x margin)`` streams (its
   capacity if chunks cost the same with more streams), when it lies inside
   the bracket and was not probed; when it says ``lo`` or less, ``lo + 1``
   (is there one more?);
3. otherwise bisect: the midpoint, or, with no failure yet, a quarter more
   than ``lo`` (at least one stream), up to ``max_streams``.

Each probe lasts the utterance (plus its backlog when overloaded), so the
estimates matter: 3 to 5 probes where plain bisection from 1 takes 6 or more.
"""
from __future__ import annotations

import math
from typing import Dict, Optional


def next_probe(verdicts: Dict[int, bool], estimate: Optional[int], max_streams: int) -> Optional[int]:
    """The next stream count to probe (see the module docstring), or ``None``: the search is done.

    ``verdicts`` maps each count probed to whether it was real time; ``estimate`` is the last probe's own
    estimate of the capacity.

    Example
    -------
    >>> next_probe({}, None, 64), next_probe({1: True}, 13, 64), next_probe({1: True, 13: False}, 9, 64)
    (1, 13, 9)
    >>> next_probe({1: True, 9: True, 13: False}, 9, 64), next_probe({1: True, 9: True, 10: False}, 9, 64)
    (10, None)
    >>> next_probe({1: True, 13: False}, None, 64), next_probe({1: True, 4: True}, 9, 4), next_probe({1: False}, 0, 64)
    (7, None, None)
    """
    if 1 not in verdicts:
        return 1
    lo = max((n for n, ok in verdicts.items() if ok), default=0)
    hi = min((n for n, ok in verdicts.items() if not ok), default=None)
    if (hi is not None and hi - lo <= 1) or lo >= max_streams:
        return None
    upper = max_streams + 1 if hi is None else hi
    if estimate is not None:
        candidate = lo + 1 if estimate <= lo else min(estimate, upper - 1)
        if candidate not in verdicts:
            return candidate
    if hi is None:
        return min(max(lo + 1, math.ceil(lo * 1.25)), max_streams)
    return (lo + hi) // 2


def capacity(verdicts: Dict[int, bool]) -> int:
    """The largest real-time stream count probed (0 when even one stream is not).

    Example
    -------
    >>> capacity({1: True, 2: True, 3: False}), capacity({1: False})
    (2, 0)
    """
    return max((n for n, ok in verdicts.items() if ok), default=0)
