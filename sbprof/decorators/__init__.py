"""SpeechBrain-style profiling decorators over ``torch.profiler``, with truthful reports.

A drop-in for the historic ``speechbrain.utils.profiling`` module (0.5.x):
only the import changes. What can be decorated and how steps are counted is
in :mod:`sbprof.decorators.targets`; what each report sums, in
:mod:`sbprof.decorators.reports`.

Modules: ``step_profiler`` (the profiler and its steps), ``recording`` (its
recording sessions), ``step_events`` (reading them; events are read by
:mod:`sbprof.measuring.events`), ``stage_schedule`` (each Brain stage's schedule count),
``options``, ``targets`` (functions, classes, instances),
``presets`` (the three decorators), ``schedule`` (schedule / export / step),
``reports`` (report_time / report_memory / events_diff).
"""
from sbprof.decorators.presets import profile, profile_analyst, profile_optimiser
from sbprof.decorators.reports import MemoryReport, TimeReport, events_diff, report_memory, report_time
from sbprof.decorators.schedule import export, schedule, step
from sbprof.decorators.step_profiler import StepProfiler

__all__ = [
    "MemoryReport", "StepProfiler", "TimeReport", "events_diff", "export", "profile", "profile_analyst",
    "profile_optimiser", "report_memory", "report_time", "schedule", "step",
]
