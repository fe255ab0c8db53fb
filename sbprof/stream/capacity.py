"""The capacity search: the largest number of concurrent streams served within the delay target, by bisection.

A probe serves ``n`` streams (:mod:`sbprof.stream.session`) and passes when
every chunk was served, the p99 delay of its chunks (arrival of a chunk's
last sample to its output) is within the target, and the delay does not grow
along the utterance (:func:`sbprof.analysis.stream_criterion.within_target`: the same
definition as the report's). Passing is taken to stop as streams are added.
The search keeps the bracket ``lo`` (largest passing count probed) <
capacity + 1 <= ``hi`` (smallest failing count) and probes inside it until
``hi = lo + 1``:

1. probe 1 stream;
2. then the last probe's own estimate, ``floor(n / utilisation)`` streams
   (where the server would be busy all the time, were chunks to cost what
   they cost in that probe), when it lies strictly inside the bracket, was
   not probed and is not just ``lo + 1`` with no failure yet (an estimate
   that creeps by one stream is not followed);
3. otherwise bisect: the midpoint, or, with no failure yet, half as many
   again as ``lo`` (at least one more), up to ``max_streams``.

Each probe lasts the utterance plus one chunk (plus its backlog when
overloaded); the search stops after ``MAX_PROBES`` probes at the latest.
"""
from __future__ import annotations

import math
from typing import Dict, Optional

MAX_PROBES = 8


def next_probe(verdicts: Dict[int, bool], estimate: Optional[int], max_streams: int) -> Optional[int]:
    """The next stream count to probe (see the module docstring), or ``None``: the search is done.

    ``verdicts`` maps each count probed to whether it passed; ``estimate`` is the last probe's own estimate.

    Example
    -------
    >>> next_probe({}, None, 64), next_probe({1: True}, 13, 64), next_probe({1: True, 13: False}, 9, 64)
    (1, 13, 9)
    >>> next_probe({1: True, 9: True, 13: False}, 9, 64), next_probe({1: True, 9: True, 10: False}, 9, 64)
    (11, None)
    >>> next_probe({1: True, 13: True}, 14, 64), next_probe({1: True, 4: True}, 9, 4), next_probe({1: False}, 0, 64)
    (20, None, None)
    """
    if 1 not in verdicts:
        return 1
    if len(verdicts) >= MAX_PROBES:
        return None
    lo = max((n for n, ok in verdicts.items() if ok), default=0)
    hi = min((n for n, ok in verdicts.items() if not ok), default=None)
    if (hi is not None and hi - lo <= 1) or lo >= max_streams or lo == 0:
        return None
    upper = max_streams + 1 if hi is None else hi
    if estimate is not None and lo < estimate < upper and estimate not in verdicts and not (
            hi is None and estimate == lo + 1):
        return estimate
    if hi is None:
        return min(max(lo + 1, math.ceil(lo * 1.5)), max_streams)
    return (lo + hi) // 2


def capacity(verdicts: Dict[int, bool]) -> int:
    """The largest passing stream count probed (0 when even one stream does not pass).

    Example
    -------
    >>> capacity({1: True, 2: True, 3: False}), capacity({1: False})
    (2, 0)
    """
    return max((n for n, ok in verdicts.items() if ok), default=0)
