"""A per-module breakdown's step statistics, for the reports' tables.

The workers save the breakdown (:class:`~sbprof.record.breakdown.ModuleBreakdown`,
the one type from attribution to report) as plain JSON and the analyses read
it back by its fields; :func:`breakdown_steps` computes the step figures its
tables print, so the renderer (:mod:`sbprof.report.modules_markdown`) only
formats. Pure.

CPU cost of a row: its CPU ms per step / 1000 / the audio seconds per step
(core-seconds per second of audio), known only where the job knows the audio
of its steps (the ``modules`` job on an interface, ``sbprof train``,
``sbprof run`` with PaddedBatch lengths); a module run on random tensors has none.

Example
-------
>>> b = ModuleBreakdown.from_dict({"step": "train", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 14.0],
...                                "cpu_step_ms_samples": [9.0, 11.0],
...                                "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 8.0,
...                                          "share": 0.67, "cpu_total_ms": 6.0}]})
>>> s = breakdown_steps(b)
>>> b.rows[0].forward_ms, s.mean_ms, s.step.median, s.cuda_mean_ms, s.cpu_mean_ms, s.cpu_cost
(None, 12.0, 12.0, None, 10.0, {})
>>> s = breakdown_steps(b, audio_s_per_step=2.0)  # 6 ms of CPU per 2 s of audio
>>> s.cpu_cost, s.step_cpu_cost
({'enc': 0.003}, 0.005)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from sbprof.base.stats import Stats, summarise
from sbprof.record.breakdown import ModuleBreakdown, ModuleRow

__all__ = ["BreakdownSteps", "ModuleBreakdown", "ModuleRow", "breakdown_steps"]  # the types the reports name


@dataclass(frozen=True)
class BreakdownSteps:
    """What the breakdown's heading prints: the mean step (ms) over its steps, their statistics, the GPU mean,
    the mean CPU ms per step; and, with the audio seconds per step, each row's CPU cost by label and the step's
    (core-seconds per second of audio; empty / ``None`` without audio or CPU times)."""

    mean_ms: float
    step: Stats
    cuda_mean_ms: Optional[float] = None
    cpu_mean_ms: Optional[float] = None
    audio_s_per_step: Optional[float] = None
    cpu_cost: Dict[str, float] = field(default_factory=dict)
    step_cpu_cost: Optional[float] = None


def breakdown_steps(breakdown: Optional[ModuleBreakdown],
                    audio_s_per_step: Optional[float] = None) -> Optional[BreakdownSteps]:
    """The step figures of a breakdown, or ``None`` without one or without step times.

    ``audio_s_per_step``: the seconds of audio each of the breakdown's steps processed (the same steps), when
    the job knows them; ``None`` or 0 leaves the CPU cost unknown.
    """
    if breakdown is None or not breakdown.step_ms_samples:
        return None
    cuda, cpu = breakdown.cuda_step_ms_samples, breakdown.cpu_step_ms_samples
    cpu_mean = sum(cpu) / len(cpu) if cpu else None
    audio = audio_s_per_step if audio_s_per_step and audio_s_per_step > 0 else None
    costs: Dict[str, float] = {}
    if audio is not None:
        # Core-seconds of CPU per second of audio: what a core spends on the row, waiting or not.
        costs = {r.label: r.cpu_total_ms / 1e3 / audio for r in breakdown.rows if r.cpu_total_ms is not None}
    return BreakdownSteps(mean_ms=sum(breakdown.step_ms_samples) / breakdown.steps,
                          step=summarise(breakdown.step_ms_samples),
                          cuda_mean_ms=sum(cuda) / len(cuda) if cuda else None, cpu_mean_ms=cpu_mean,
                          audio_s_per_step=audio,
                          cpu_cost=costs,
                          step_cpu_cost=cpu_mean / 1e3 / audio if cpu_mean is not None and audio is not None
                          else None)
