"""A per-module breakdown's step statistics, for the reports' tables.

The workers save the breakdown (:class:`~sbprof.record.breakdown.ModuleBreakdown`,
the one type from attribution to report) as plain JSON and the analyses read
it back by its fields; :func:`breakdown_steps` computes the step figures its
tables print, so the renderer (:mod:`sbprof.report.modules_markdown`) only
formats. Pure.

Example
-------
>>> b = ModuleBreakdown.from_dict({"step": "train", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 14.0],
...                                "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 8.0,
...                                          "share": 0.67}]})
>>> s = breakdown_steps(b)
>>> b.rows[0].forward_ms, s.mean_ms, s.step.median, s.cuda_mean_ms
(None, 12.0, 12.0, None)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sbprof.base.stats import Stats, summarise
from sbprof.record.breakdown import ModuleBreakdown, ModuleRow

__all__ = ["BreakdownSteps", "ModuleBreakdown", "ModuleRow", "breakdown_steps"]  # the types the reports name


@dataclass(frozen=True)
class BreakdownSteps:
    """What the breakdown's heading prints: the mean step (ms) over its steps, their statistics, the GPU mean."""

    mean_ms: float
    step: Stats
    cuda_mean_ms: Optional[float] = None


def breakdown_steps(breakdown: Optional[ModuleBreakdown]) -> Optional[BreakdownSteps]:
    """The step figures of a breakdown, or ``None`` without one or without step times."""
    if breakdown is None or not breakdown.step_ms_samples:
        return None
    cuda = breakdown.cuda_step_ms_samples
    return BreakdownSteps(mean_ms=sum(breakdown.step_ms_samples) / breakdown.steps,
                          step=summarise(breakdown.step_ms_samples),
                          cuda_mean_ms=sum(cuda) / len(cuda) if cuda else None)
