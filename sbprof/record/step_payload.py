"""What a profiler's ``measurement(step)`` keeps in its record's ``extra``, typed: the recorded steps' figures.

Example
-------
>>> StepPayload(recorded_steps=2, operator_cpu_us=150.0, device_us=0.0).to_dict()
{'recorded_steps': 2, 'operator_cpu_us': 150.0, 'device_us': 0.0}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sbprof.record.payload import Payload


@dataclass(frozen=True)
class StepPayload(Payload):
    """Over the steps whose operators were recorded (none when only timed): their count, the host time inside
    operators and the device's busy time (µs), and with ``profile_memory`` the allocators' peaks (bytes)."""

    recorded_steps: Optional[int] = None
    operator_cpu_us: Optional[float] = None
    device_us: Optional[float] = None
    allocated_peak_cpu_bytes: Optional[float] = None
    allocated_peak_device_bytes: Optional[float] = None
