"""Derived figures of one measured cell (RTF statistics, RTFx, memory in GB, busy time), JSON-ready.

Pure functions of a record: computed from its raw samples every time they
are needed. The markdown and CSV renderers and the ``derived`` block of
``results.json`` all read them from here, so every output states the same
numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from sbprof.analysis.cell_payload import cell_payload
from sbprof.record import Measurement
from sbprof.base.stats import GB, Stats, rtf, rtfx, summarise


@dataclass(frozen=True)
class Outcome:
    """A record's status (``ok``, ``skipped``, ``oom``, ``error``) and message: what a table shows instead of
    numbers when a cell or point has none."""

    status: str
    message: str = ""

    @classmethod
    def of(cls, m: Measurement) -> "Outcome":
        return cls(m.status, m.message)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def setting_sort_key(device: str, threads: int) -> Tuple[int, str, int]:
    """CUDA settings first, then CPU, each by thread count (the order of every output)."""
    return (0 if device.startswith("cuda") else 1, device, threads)


def cell_sort_key(m: Measurement) -> Tuple[Any, ...]:
    """Order of cells in every output: model, variant, setting, audio length, batch size, run."""
    c = m.cell
    return ((c.model, c.variant or "") + setting_sort_key(c.device, c.threads)
            + (c.audio_s or 0.0, c.batch_size or 0, c.run))


def batch_audio_seconds(m: Measurement) -> float:
    """Total seconds of audio in the cell's batch (all utterances), the RTF denominator."""
    if m.audio_seconds is None:
        raise ValueError(f"measurement {m.label!r} does not say how much audio one call processed")
    return float(m.audio_seconds)


def rtf_stats(m: Measurement, metric: str = "wall_s") -> Optional[Stats]:
    """Statistics of the per-batch RTF from one sample list; ``None`` without samples.

    Example
    -------
    >>> m = Measurement(label="c", wall_s=[0.1, 0.2, 0.3], audio_seconds=10.0)
    >>> round(rtf_stats(m).median, 6)
    0.02
    """
    samples = getattr(m, metric)
    if not m.ok or not samples:
        return None
    audio = batch_audio_seconds(m)
    return summarise([rtf(s, audio) for s in samples])


def median_rtfx(m: Measurement) -> Optional[float]:
    """Seconds of audio per second of wall-clock processing, from the median batch time."""
    if not m.ok or not m.wall_s:
        return None
    return rtfx(m.summary("wall_s").median, batch_audio_seconds(m))


def peak_gb(m: Measurement) -> Optional[float]:
    """The cell's peak memory in GB: CUDA allocator peak on CUDA, process peak on CPU."""
    if not m.ok or m.memory is None:
        return None
    peak = m.memory.peak_cuda_bytes if m.cell.device.startswith("cuda") else m.memory.peak_rss_bytes
    return None if peak is None else peak / GB


def batch_memory_gb(m: Measurement) -> Optional[float]:
    """The memory one batch adds, in GB: CUDA allocator on CUDA, resident memory on CPU."""
    if not m.ok or m.memory is None:
        return None
    added = m.memory.peak_cuda_delta_bytes if m.cell.device.startswith("cuda") else m.memory.peak_rss_delta_bytes
    return None if added is None else added / GB


def busy_rtf(m: Measurement) -> Optional[Dict[str, float]]:
    """Host-busy and GPU-busy RTF of the cell's profiled batch (CUDA settings), or ``None``."""
    split = cell_payload(m).device_split
    if not m.ok or not split:
        return None
    audio = batch_audio_seconds(m)
    return {"host_busy_rtf": split["host_busy_s"] / audio, "gpu_busy_rtf": split["gpu_busy_s"] / audio,
            "profiled_rtf": split["wall_s"] / audio}


def cell_figures(m: Measurement) -> Dict[str, Any]:
    """All derived figures of one cell as a JSON-ready dict (``None`` where not measured).

    Example
    -------
    >>> m = Measurement(label="c", wall_s=[0.1, 0.2, 0.3], cpu_s=[0.1, 0.2, 0.3], audio_seconds=10.0)
    >>> f = cell_figures(m)
    >>> round(f["rtf"]["median"], 6), round(f["rtfx"], 6)
    (0.02, 50.0)
    """
    def as_dict(stats: Optional[Stats]) -> Optional[dict]:
        return None if stats is None else stats.to_dict()

    return {
        "status": m.status,
        "batch_audio_s": m.audio_seconds,
        "wall_s_median": m.summary("wall_s").median if m.ok and m.wall_s else None,
        "rtf": as_dict(rtf_stats(m, "wall_s")),
        "rtf_cpu": as_dict(rtf_stats(m, "cpu_s")),
        "rtf_cuda": as_dict(rtf_stats(m, "cuda_s")),
        "rtfx": median_rtfx(m),
        "peak_memory_gb": peak_gb(m),
        "batch_memory_gb": batch_memory_gb(m),
        "busy_rtf": busy_rtf(m),
    }
