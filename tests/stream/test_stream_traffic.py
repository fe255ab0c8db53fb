"""The traffic layouts of the stream job's sessions (:func:`sbprof.stream.session.schedule`), read from what they
schedule: spread keeps n streams live and ends one at a time, Poisson keeps n live on average, aligned ends all
in one chunk period."""
from __future__ import annotations

import math
import statistics

import pytest

from sbprof.stream.session import schedule

RATE, CHUNK, FLUSH = 16000, 3200, 1  # 200 ms chunks


def _live(chunks, t: float) -> int:
    """Sessions whose audio spans ``t`` (a chunk's audio: from ``length`` before its arrival to its arrival)."""
    return len({c.stream for c in chunks if c.arrival_s - c.length / RATE <= t < c.arrival_s})


def _ends(chunks, n_samples: int):
    return sorted(c.arrival_s for c in chunks if c.length > 0 and c.first + c.length == n_samples)


@pytest.mark.parametrize("streams", [1, 3, 8, 40])
def test_spread_keeps_every_stream_live_and_ends_them_one_chunk_period_apart_or_more(streams):
    n = 32000  # 2 s: 10 chunks
    chunks = schedule(n, CHUNK, FLUSH, streams, RATE, "spread")
    m, chunk_s = 10, 0.2
    assert [(c.index, c.length) for c in chunks if c.stream == 0][:m] == [(k, CHUNK) for k in range(m)]
    for t in [k * 0.1 + 0.05 for k in range(2, 19)]:
        assert _live(chunks, t) == streams, t
    ends = _ends(chunks, n)
    assert len(ends) == streams  # one end per stream in the window
    if streams <= m:
        assert all(b - a >= chunk_s * (1 - 1 / streams) - 1e-9 for a, b in zip(ends, ends[1:]))  # one at a time
    # the streams' chunks interleave evenly: stream i at i/n of a chunk
    phases = sorted({round((c.arrival_s % chunk_s) / chunk_s * streams) % streams for c in chunks})
    assert phases == list(range(streams))


def test_aligned_ends_every_stream_in_one_chunk_period():
    n = 32000
    ends = _ends(schedule(n, CHUNK, FLUSH, 8, RATE, "aligned"), n)
    assert len(ends) == 8 and ends[-1] - ends[0] < 0.2


def test_poisson_keeps_n_sessions_live_on_average_with_random_phases():
    n, streams, chunk_s = 32000, 6, 0.2
    counts = []
    for seed in range(40):
        chunks = schedule(n, CHUNK, FLUSH, streams, RATE, "poisson", seed=seed)
        counts += [_live(chunks, t) for t in (0.45, 0.85, 1.25, 1.65)]
    assert statistics.mean(counts) == pytest.approx(streams, rel=0.15)
    assert statistics.pstdev(counts) > 0.5  # it varies, as random arrivals do
    chunks = schedule(n, CHUNK, FLUSH, streams, RATE, "poisson", seed=1)
    assert chunks == schedule(n, CHUNK, FLUSH, streams, RATE, "poisson", seed=1)  # seeded
    phases = {round(c.arrival_s % chunk_s, 6) for c in chunks}
    assert len(phases) > streams  # not evenly interleaved


def test_a_session_sends_its_chunks_in_order_at_the_pace_of_the_audio():
    n = 30000  # 9 full chunks and a short one
    for traffic in ("spread", "poisson", "aligned"):
        chunks = schedule(n, CHUNK, FLUSH, 5, RATE, traffic, seed=3)
        by_session = {}
        for c in chunks:
            by_session.setdefault(c.stream, []).append(c)
        for cs in by_session.values():
            idx = [c.index for c in cs]
            assert idx == list(range(idx[0], idx[0] + len(idx)))
            audio = [c for c in cs if c.length > 0]
            for a, b in zip(audio, audio[1:]):
                assert b.arrival_s - a.arrival_s == pytest.approx(b.length / RATE)
            flush = [c for c in cs if c.length == 0]
            assert not flush or (audio[-1].first + audio[-1].length == n and flush[0].arrival_s == audio[-1].arrival_s)
    assert math.isclose(max(c.arrival_s for c in schedule(n, CHUNK, FLUSH, 5, RATE, "spread")),
                        n / RATE + 4 / 5 * 0.2, abs_tol=0.2)
