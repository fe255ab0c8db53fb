"""The figures of one pass's sessions, from its per-chunk columns.

First token, final result and emission latencies (:func:`session_times`), the delays of the steady and of the
end-of-utterance chunks (:func:`split_delays`), and the cost growth along a session (:func:`cost_growth`). The
definitions are in :mod:`sbprof.analysis.stream`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.stream_criterion import audio_rows


@dataclass(frozen=True)
class SessionTimes:
    """The per-session figures of one cell (runs pooled), seconds: first token, final result, emission latencies."""

    first_token_s: List[float]
    final_s: List[float]
    emission_s: List[float]


def session_times(chunks: Dict[str, List[Any]], sample_rate: int, onset_s: float = 0.0,
                  reference_ends_s: Optional[Sequence[float]] = None) -> SessionTimes:
    """First token (from the speech onset), final result and emission latencies of each session of one pass:
    first token and emission latency only for sessions that start with the utterance, final result only for
    those that end in the window (see :mod:`sbprof.analysis.stream`).

    Example
    -------
    >>> cols = {"stream": [0, 0, 0], "index": [0, 1, 2], "samples": [100, 50, 0], "arrival_s": [1.0, 1.5, 1.5],
    ...         "end_s": [1.2, 1.7, 1.9], "tokens": [0, 3, 0]}
    >>> t = session_times(cols, 100, onset_s=0.5, reference_ends_s=[0.6, 0.7, 1.9]); t.first_token_s, t.final_s
    ([1.2], [0.3999999999999999])
    >>> [round(x, 3) for x in t.emission_s]
    [1.1, 1.0, -0.2]
    """
    first: List[float] = []
    final: List[float] = []
    emission: List[float] = []
    rows_of: Dict[int, List[Tuple[int, int]]] = {}
    for i, s in enumerate(chunks["stream"]):
        rows_of.setdefault(s, []).append((chunks["index"][i], i))
    for rows in rows_of.values():
        rows.sort()
        head = rows[0][1]
        if chunks["samples"][rows[-1][1]] == 0:
            last = rows[-1][1]
            final.append(chunks["end_s"][last] - chunks["arrival_s"][last])
        if rows[0][0] != 0:
            continue  # a session the window opened in the middle of: no start of its own
        start = chunks["arrival_s"][head] - chunks["samples"][head] / sample_rate
        emitted = [i for _, i in rows if (chunks["tokens"][i] or 0) > 0]
        if emitted:
            first.append(chunks["end_s"][emitted[0]] - (start + onset_s))
        if reference_ends_s:
            k = 0
            for _, i in rows:
                for _ in range(chunks["tokens"][i] or 0):
                    if k < len(reference_ends_s):
                        emission.append(chunks["end_s"][i] - (start + reference_ends_s[k]))
                    k += 1
    return SessionTimes(first, final, emission)


def cost_growth(chunks: Dict[str, List[Any]], compute_s: Sequence[float], chunk_samples: int) -> Optional[float]:
    """Median compute of the last third of full chunks (by position) over the first third, chunk 0 left out.

    Example
    -------
    >>> cols = {"index": [0, 1, 2, 3, 4, 5, 6], "samples": [10] * 7}
    >>> cost_growth(cols, [9.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0], 10)
    3.0
    """
    by_position: Dict[int, List[float]] = {}
    for i, (index, samples) in enumerate(zip(chunks["index"], chunks["samples"])):
        if index > 0 and samples == chunk_samples:
            by_position.setdefault(index, []).append(compute_s[i])
    series = [statistics.median(by_position[k]) for k in sorted(by_position)]
    third = len(series) // 3
    if third < 1:
        return None
    return statistics.median(series[-third:]) / statistics.median(series[:third])


def split_delays(chunks: Dict[str, List[Any]], utterance_samples: int,
                 chunk_samples: int) -> Tuple[List[float], List[float]]:
    """Delays (s) of the steady chunks and of the end-of-utterance chunks (each holding a session's last sample).

    Example
    -------
    >>> split_delays({"samples": [10, 5, 0], "index": [0, 1, 2], "arrival_s": [1, 1.5, 1.5],
    ...               "end_s": [1.1, 1.7, 1.8]}, 15, 10)
    ([0.10000000000000009], [0.19999999999999996])
    """
    last_index = max(0, math.ceil(utterance_samples / chunk_samples) - 1)
    steady, end = [], []
    for i in audio_rows(chunks):
        d = chunks["end_s"][i] - chunks["arrival_s"][i]
        (end if chunks["index"][i] == last_index else steady).append(d)
    return steady, end
