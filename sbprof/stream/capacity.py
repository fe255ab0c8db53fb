"""The capacity search: the largest number of concurrent streams served within the delay target, by bisection,
then repeated probes at the boundary.

A probe serves ``n`` streams (:mod:`sbprof.stream.session`) and passes when
every chunk was served, the p99 delay of its chunks (arrival of a chunk's
last sample to its output) is within the target, and the delay does not grow
along the utterance (:func:`sbprof.analysis.stream_criterion.within_target`: the same
definition as the report's). Passing is taken to stop as streams are added.

**Bisection**, on the first probe of each count: the search keeps the
bracket ``lo`` (largest passing count probed) < capacity + 1 <= ``hi``
(smallest failing count) and probes inside it until ``hi = lo + 1``:

1. probe 1 stream;
2. then the last probe's own estimate, ``floor(n / utilisation)`` streams
   (where the server would be busy all the time, were chunks to cost what
   they cost in that probe), when it lies strictly inside the bracket, was
   not probed and is not just ``lo + 1`` with no failure yet (an estimate
   that creeps by one stream is not followed);
3. otherwise bisect: the midpoint, or, with no failure yet, half as many
   again as ``lo`` (at least one more), up to ``max_streams``;

at most :data:`MAX_PROBES` counts.

**Boundary**: load that comes and goes moves the boundary, so the counts
around it are probed again until each has ``per_count`` probes: the capacity
``c`` (the largest count at which at least half of the probes passed:
:func:`~sbprof.analysis.stream_criterion.capacity_range`) and ``c + 1``; and
while a count at or below ``c`` has failed once, the count below it too;
while a count above ``c`` has passed once, the count above it too. The count
with the fewest probes goes first, ``c`` and ``c + 1`` before the others
(so a drifting load hits each alike, and the capacity is settled first); the
search stops at ``MAX_PROBES + BOUNDARY_BUDGET x per_count`` probes in all
(20 at 3 a count), however the load moves the boundary. The range it moved over
is :func:`~sbprof.analysis.stream_criterion.capacity_range`'s.

Each probe lasts the utterance plus one chunk (plus its backlog when
overloaded).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

from sbprof.analysis.stream_criterion import capacity_range

MAX_PROBES = 8
"""Stream counts the bisection probes at most."""
BOUNDARY_BUDGET = 4
"""The search stops at ``MAX_PROBES + BOUNDARY_BUDGET x per_count`` probes in all, however the boundary moves."""


def _bisect(verdicts: Dict[int, bool], estimate: Optional[int], max_streams: int) -> Optional[int]:
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


def _boundary(outcomes: Dict[int, Sequence[bool]], per_count: int, max_streams: int) -> Optional[int]:
    found = capacity_range(outcomes)[0]
    needed: List[int] = [k for k in (found, found + 1) if 1 <= k <= max_streams]
    k = found
    while k >= 1 and not all(outcomes.get(k, [True])):  # failed once at or below the capacity: one count lower too
        k -= 1
        needed += [k] if k >= 1 else []
    k = found + 1
    while k <= max_streams and any(outcomes.get(k, [False])):  # passed once above it: one count higher too
        k += 1
        needed += [k] if k <= max_streams else []
    short = [k for k in needed if len(outcomes.get(k, [])) < per_count]
    # The capacity and the next count first, the one with fewer probes (a drifting load hits both alike).
    return min(short, key=lambda k: (k not in (found, found + 1), len(outcomes.get(k, [])), k)) if short else None


def next_probe(outcomes: Dict[int, Sequence[bool]], estimate: Optional[int], max_streams: int,
               per_count: int = 1) -> Optional[int]:
    """The next stream count to probe (see the module docstring), or ``None``: the search is done.

    ``outcomes`` maps each count probed to its probes' verdicts (passed or not), in order; ``estimate`` is the
    last probe's own estimate; ``per_count`` how many probes each count at the boundary gets (1: none repeated).

    Example
    -------
    >>> next_probe({}, None, 64), next_probe({1: [True]}, 13, 64), next_probe({1: [True], 13: [False]}, 9, 64)
    (1, 13, 9)
    >>> next_probe({1: [True], 9: [True], 13: [False]}, 9, 64), next_probe({1: [True], 9: [True], 10: [False]}, 9, 64)
    (11, None)
    >>> next_probe({1: [True], 13: [True]}, 14, 64), next_probe({1: [True], 4: [True]}, 9, 4)
    (20, None)
    >>> next_probe({1: [False]}, 0, 64)
    >>> next_probe({1: [True], 9: [True], 10: [False]}, 9, 64, per_count=2)  # repeat the boundary
    9
    >>> next_probe({1: [True], 9: [True, False], 10: [False, False]}, 9, 64, per_count=2)  # 9 failed once: 8 too
    8
    """
    bisect = _bisect({n: r[0] for n, r in outcomes.items() if r}, estimate, max_streams)
    if bisect is not None or per_count <= 1:
        return bisect
    if sum(len(r) for r in outcomes.values()) >= MAX_PROBES + BOUNDARY_BUDGET * per_count:
        return None
    return _boundary(outcomes, per_count, max_streams)
