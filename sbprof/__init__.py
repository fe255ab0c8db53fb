"""sbprof: honest time, memory and real-time-factor profiling of PyTorch / SpeechBrain models.

Public API (everything else is internal):

- measuring core: :func:`measure` -> :class:`Measurement` (raw samples, peaks),
  :func:`summarise`, :func:`rtf`, :func:`rtfx`, :data:`METRICS`;
- SpeechBrain-style decorators: :func:`profile`, :func:`profile_optimiser`,
  :func:`profile_analyst`, :func:`schedule`, :func:`export`, :func:`step`,
  :func:`report_time`, :func:`report_memory`, :func:`events_diff`.
"""
from sbprof.decorators import (
    StepProfiler,
    events_diff,
    export,
    profile,
    profile_analyst,
    profile_optimiser,
    report_memory,
    report_time,
    schedule,
    step,
)
from sbprof.env import collect_env
from sbprof.errors import BackendUnavailable, ConfigError, MeasurementError, SbprofError
from sbprof.memory import CpuPeak, CudaPeak, MemoryPeak
from sbprof.record import Env, Measurement
from sbprof.stats import METRICS, Stats, rtf, rtfx, summarise
from sbprof.timing import measure

__all__ = [
    "BackendUnavailable", "ConfigError", "CpuPeak", "CudaPeak", "Env", "METRICS", "Measurement",
    "MeasurementError", "MemoryPeak", "SbprofError", "Stats", "StepProfiler", "collect_env",
    "events_diff", "export", "measure", "profile", "profile_analyst", "profile_optimiser",
    "report_memory", "report_time", "rtf", "rtfx", "schedule", "step", "summarise",
]
