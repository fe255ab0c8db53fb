"""sbprof: honest time, memory and real-time-factor profiling of PyTorch / SpeechBrain models.

Public API (everything else is internal):

- measuring core: :func:`measure` -> :class:`Measurement` (raw samples, peaks),
  :func:`summarise`, :func:`rtf`, :func:`rtfx`, :data:`METRICS`;
- SpeechBrain-style decorators: :func:`profile`, :func:`profile_optimiser`,
  :func:`profile_analyst`, :func:`schedule`, :func:`export`, :func:`step`,
  :func:`report_time`, :func:`report_memory`, :func:`events_diff`;
- the profiling recipe: :func:`load_config` -> :class:`SweepConfig`,
  :func:`run_sweep`, :func:`grid_picture`; renderers :func:`render_results`,
  :func:`render_markdown`, :func:`render_csv`, :func:`write_reports`.
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
from sbprof.report import render_csv, render_markdown, render_results, write_reports
from sbprof.stats import METRICS, Stats, rtf, rtfx, summarise
from sbprof.sweep import SweepConfig, SweepOutcome, grid_picture, load_config, run_sweep
from sbprof.timing import measure

__all__ = [
    "BackendUnavailable", "ConfigError", "CpuPeak", "CudaPeak", "Env", "METRICS", "Measurement",
    "MeasurementError", "MemoryPeak", "SbprofError", "Stats", "StepProfiler", "SweepConfig", "SweepOutcome",
    "collect_env", "events_diff", "export", "grid_picture", "load_config", "measure", "profile",
    "profile_analyst", "profile_optimiser", "render_csv", "render_markdown", "render_results",
    "report_memory", "report_time", "rtf", "rtfx", "run_sweep", "schedule", "step", "summarise",
    "write_reports",
]
