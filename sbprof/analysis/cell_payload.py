"""What a ``profile`` or ``compare-models`` worker saves in a cell's ``extra``, typed.

The worker builds a :class:`CellPayload` and saves ``to_dict()`` (only the
keys it set); the analysis reads it back with :func:`cell_payload`.

Example
-------
>>> from sbprof.record import Measurement
>>> m = Measurement("c", extra=CellPayload(others_cpu_s=0.5, window_s=2.0, loadavg_1m=1.25).to_dict())
>>> m.extra
{'others_cpu_s': 0.5, 'window_s': 2.0, 'loadavg_1m': 1.25}
>>> cell_payload(m).window_s, cell_payload(m).reference
(2.0, None)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from sbprof.record import Measurement
from sbprof.record.codec import from_json
from sbprof.record.payload import Payload


@dataclass(frozen=True)
class CellPayload(Payload):
    """A timed cell's ``extra`` (each key optional); a profiled pass adds ``device_split`` and ``trace``."""

    others_cpu_s: Optional[float] = None  # CPU time of the machine's other processes over the timed window (s)
    window_s: Optional[float] = None  # the timed window's wall time (s)
    reference: Optional[str] = None  # "start" or "end": a noise-floor reference record's place in its process
    process_warmup_calls: Optional[int] = None  # calls the worker process made warming up, on its first cell
    loadavg_1m: Optional[float] = None
    cuda_initialized: Optional[bool] = None  # whether the worker ever paid for a CUDA context
    device_memory_bytes: Optional[float] = None  # the device's memory (bytes)
    energy_error: Optional[str] = None  # why the energy counters could not be read
    device_split: Optional[Dict[str, float]] = None  # wall, host-busy and GPU-busy seconds of one profiled call
    trace: Optional[str] = None  # the profiled pass's trace file, relative to the output folder


def cell_payload(m: Measurement) -> CellPayload:
    """The record's ``extra``, typed."""
    return from_json(CellPayload, m.extra, f"record {m.label!r}: extra")
