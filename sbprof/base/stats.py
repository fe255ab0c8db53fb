"""Pure statistics on raw samples, and the table of metrics every renderer uses.

Nothing here measures: functions take lists of numbers and return numbers, so
they are tested with exact, hand-computed values.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Dict, Sequence


@dataclass(frozen=True)
class Stats:
    """Summary of a list of raw samples (derived, never stored in place of them).

    Quartiles use linear interpolation between order statistics (the
    "inclusive" method, same as ``numpy.percentile`` default).
    """

    count: int
    median: float
    q1: float
    q3: float
    iqr: float
    mean: float
    stdev: float
    min: float
    max: float

    def to_dict(self) -> dict:
        # Not the Codec mixin: sbprof.base sits below sbprof.record (which imports this module), and these flat
        # numbers give the codec's JSON anyway.
        return asdict(self)


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, interpolated as :class:`Stats` does.

    Example
    -------
    >>> quantile([4.0, 1.0, 3.0, 2.0, 5.0], 0.1), quantile([2.0], 0.9)
    (1.4, 2.0)
    """
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("quantile() needs at least one sample")
    return _quantile(xs, q)


def summarise(samples: Sequence[float]) -> Stats:
    """Median, quartiles, IQR, mean, sample stdev, min and max of ``samples``.

    Arguments
    ---------
    samples : sequence of float
        Raw measurements (at least one).

    Returns
    -------
    Stats

    Example
    -------
    >>> s = summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    >>> (s.median, s.q1, s.q3, s.iqr, s.count)
    (3.0, 2.0, 4.0, 2.0, 5)
    """
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("summarise() needs at least one sample")
    q1, q3 = _quantile(xs, 0.25), _quantile(xs, 0.75)
    return Stats(
        count=len(xs),
        median=_quantile(xs, 0.5),
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        mean=statistics.fmean(xs),
        stdev=statistics.stdev(xs) if len(xs) > 1 else 0.0,
        min=xs[0],
        max=xs[-1],
    )


def rtf(processing_s: float, audio_s: float) -> float:
    """Real-time factor: processing time divided by the seconds of audio processed.

    Below 1 is faster than real time.

    Example
    -------
    >>> rtf(0.5, 10.0)
    0.05
    """
    if audio_s <= 0:
        raise ValueError(f"audio seconds must be positive, got {audio_s}")
    return processing_s / audio_s


def rtfx(processing_s: float, audio_s: float) -> float:
    """Inverse real-time factor (RTFx): seconds of audio processed per second.

    The Open ASR leaderboard reports this; above 1 is faster than real time.

    Example
    -------
    >>> rtfx(0.5, 10.0)
    20.0
    """
    if processing_s <= 0:
        raise ValueError(f"processing time must be positive, got {processing_s}")
    return audio_s / processing_s


@dataclass(frozen=True)
class Metric:
    """What a reported figure means: its unit, definition and better direction."""

    name: str
    unit: str
    definition: str
    lower_is_better: bool


METRICS: Dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("wall_s", "s", "wall-clock time of one call, device synchronised before and after", True),
        Metric("cpu_s", "s", "CPU time of the whole process (user + system, all threads) during one call", True),
        Metric("cuda_s", "s", "GPU time between CUDA events recorded before and after one call", True),
        Metric("rtf", "", "real-time factor: processing time of a batch / total seconds of audio in the batch (lower is faster; < 1 is faster than real time)", True),
        Metric("rtfx", "", "inverse real-time factor: total seconds of audio in the batch / processing time (higher is faster)", False),
        Metric("peak_rss_bytes", "GB", "peak resident memory of the whole process during one call (model weights and everything the process holds included)", True),
        Metric("peak_rss_delta_bytes", "GB", "memory one call adds: peak resident memory during the call minus resident memory just before it, garbage collected and freed heap handed back to the system first (glibc malloc_trim), so memory kept from earlier calls cannot hide it", True),
        Metric("peak_cuda_bytes", "GB", "peak memory allocated by PyTorch's CUDA caching allocator during one call (model weights included)", True),
        Metric("peak_cuda_delta_bytes", "GB", "CUDA memory one call adds: allocator peak during the call minus the allocation just before it", True),
        Metric("host_busy_rtf", "", "host busy time of one profiled batch / audio seconds: its wall time minus the time the host was blocked waiting for the GPU (cuda*Synchronize, cudaMemcpy*)", True),
        Metric("gpu_busy_rtf", "", "GPU busy time of one profiled batch / audio seconds: the durations of its kernels, copies and memsets, each counted once", True),
    ]
}

GB = 1e9
"""Bytes per GB (decimal, as the field's tables use)."""
