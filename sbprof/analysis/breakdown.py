"""A per-module breakdown as saved in a record (``ModuleBreakdown.to_dict()``), typed, and its step statistics.

The workers save the breakdown as plain JSON; :class:`Breakdown` reads it
back by its fields (:func:`sbprof.record.codec.from_json`) and
:func:`breakdown_steps` computes the step figures its tables print, so the
renderer (:mod:`sbprof.report.modules_markdown`) only formats. Pure.

Example
-------
>>> b = Breakdown.from_dict({"step": "train", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 14.0],
...                          "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 8.0,
...                                    "share": 0.67}]})
>>> s = breakdown_steps(b)
>>> b.rows[0].forward_ms, s.mean_ms, s.step.median, s.cuda_mean_ms
(None, 12.0, 12.0, None)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from sbprof.base.stats import Stats, summarise
from sbprof.record.codec import Codec, from_json


@dataclass(frozen=True)
class BreakdownRow(Codec):
    """One module's row: time per step (host clock, and the GPU clock on CUDA), its share, its memory."""

    label: str
    type: str
    depth: int
    calls: float
    total_ms: float
    share: float
    forward_ms: Optional[float] = None
    forward_self_ms: Optional[float] = None
    backward_ms: Optional[float] = None
    backward_self_ms: Optional[float] = None
    cuda_total_ms: Optional[float] = None
    cuda_share: Optional[float] = None
    cuda_forward_ms: Optional[float] = None
    cuda_forward_self_ms: Optional[float] = None
    cuda_backward_ms: Optional[float] = None
    cuda_backward_self_ms: Optional[float] = None
    memory: Optional[Dict[str, Optional[float]]] = None


@dataclass(frozen=True)
class Breakdown(Codec):
    """A whole breakdown: the step it covers, its step times (ms), its rows."""

    step: str
    mode: str
    steps: int
    step_ms_samples: List[float]
    cuda_step_ms_samples: Optional[List[float]] = None
    rows: List[BreakdownRow] = field(default_factory=list)
    never_ran: List[str] = field(default_factory=list)
    memory_peak: Optional[Dict[str, Optional[float]]] = None
    memory_note: Optional[str] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class BreakdownSteps:
    """What the breakdown's heading prints: the mean step (ms) over its steps, their statistics, the GPU mean."""

    mean_ms: float
    step: Stats
    cuda_mean_ms: Optional[float] = None


def breakdown_steps(breakdown: Union[Breakdown, Dict[str, Any], None]) -> Optional[BreakdownSteps]:
    """The step figures of a breakdown (or of its saved dict), or ``None`` without one or without step times."""
    if isinstance(breakdown, dict):
        breakdown = from_json(Breakdown, breakdown)
    if breakdown is None or not breakdown.step_ms_samples:
        return None
    cuda = breakdown.cuda_step_ms_samples
    return BreakdownSteps(mean_ms=sum(breakdown.step_ms_samples) / breakdown.steps,
                          step=summarise(breakdown.step_ms_samples),
                          cuda_mean_ms=sum(cuda) / len(cuda) if cuda else None)
