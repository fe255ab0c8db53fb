"""sbprof: honest time, memory and real-time-factor profiling of PyTorch / SpeechBrain models.

Public API (everything else is internal):

- measuring core: :func:`measure` -> :class:`Measurement` (raw samples, peaks),
  :func:`summarise`, :func:`rtf`, :func:`rtfx`, :data:`METRICS`;
- counts: :func:`count_flops` -> :class:`FlopCount` (FLOPs / MACs, per module,
  forward and backward), :func:`count_params` -> :class:`ParamCount`;
- SpeechBrain-style decorators: :func:`profile`, :func:`profile_optimiser`,
  :func:`profile_analyst`, :func:`schedule`, :func:`export`, :func:`step`,
  :func:`report_time`, :func:`report_memory`, :func:`events_diff`;
- per-module attribution: :class:`ModuleAttribution` -> :class:`ModuleBreakdown`,
  :func:`module_memory`; energy: :class:`EnergyMeter`; the regression
  gate: :func:`gate` (two :class:`Results` -> verdicts);
- every job (:data:`JOBS`: ``profile``, ``train``, ``compare-models``...):
  :func:`run` a job's YAML file (what ``sbprof JOB CONFIG.yaml`` does),
  :func:`render_only` a saved results folder, :func:`load_results`;
  :func:`grid_picture` shows a sweep's grid and its triangle rule.

``import sbprof`` is light: each name is imported from its module on first
use (PEP 562), so a command that only renders saved results, or a worker
running in another interpreter, never pays for torch or SpeechBrain.

Example
-------
>>> import sbprof
>>> sbprof.rtf(0.5, 10.0)
0.05
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List

# Public name -> the module that defines it.
_EXPORTS: Dict[str, str] = {
    **dict.fromkeys(("StepProfiler", "events_diff", "export", "profile", "profile_analyst",
                     "profile_optimiser", "report_memory", "report_time", "schedule", "step"),
                    "sbprof.decorators"),
    "collect_env": "sbprof.measuring.env",
    **dict.fromkeys(("FlopCount", "FlopCounter", "count_flops"), "sbprof.measuring.flops"),
    **dict.fromkeys(("ParamCount", "count_params"), "sbprof.measuring.params"),
    **dict.fromkeys(("BackendUnavailable", "ConfigError", "MeasurementError", "SbprofError"), "sbprof.base.errors"),
    **dict.fromkeys(("CpuPeak", "CudaPeak"), "sbprof.measuring.memory"),
    **dict.fromkeys(("Cell", "Counts", "Energy", "Env", "Measurement", "MemoryPeak"), "sbprof.record"),
    **dict.fromkeys(("Results", "load_results"), "sbprof.results"),
    **dict.fromkeys(("METRICS", "Stats", "rtf", "rtfx", "summarise"), "sbprof.base.stats"),
    "grid_picture": "sbprof.analysis.grid",
    "JOBS": "sbprof.registry",
    "run": "sbprof.registry",
    "render_only": "sbprof.registry",
    "measure": "sbprof.measuring.timing",
    **dict.fromkeys(("ModuleAttribution", "ModuleBreakdown", "module_memory"), "sbprof.measuring.modules"),
    "EnergyMeter": "sbprof.measuring.energy.meter",
    "gate": "sbprof.analysis.gate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sbprof' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
