"""The steps of one ``sbprof run`` stage: which step had which role, the loop's time around the measured steps,
and what the trace cost. Pure: lists in, figures out.

Example
-------
>>> roles = ["warmup", "flops", "measured", "measured", "memory", "traced"]
>>> role_runs(roles)
[('warm-up', 1, 1), ('FLOPs', 2, 2), ('measured', 3, 4), ('memory', 5, 5), ('traced', 6, 6)]
>>> loop = loop_shares(wait=[0.02, 0.02], between=[0.02, None], step=[0.02, 0.04])
>>> [round(x, 3) for x in (loop.wait_share, loop.between_share, loop.step_share)]
[0.333, 0.167, 0.5]
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

ROLE_NAMES = {"warmup": "warm-up", "flops": "FLOPs", "measured": "measured", "memory": "memory",
              "modules": "per-module", "traced": "traced", "traced_cut": "traced (cut)", "spare": "not used"}


def role_runs(roles: Sequence[str]) -> List[Tuple[str, int, int]]:
    """Consecutive steps of one role as ``(role name, first, last)``, steps counted from 1."""
    runs: List[Tuple[str, int, int]] = []
    for i, role in enumerate(roles, start=1):
        name = ROLE_NAMES.get(role, role)
        if runs and runs[-1][0] == name and runs[-1][2] == i - 1:
            runs[-1] = (name, runs[-1][1], i)
        else:
            runs.append((name, i, i))
    return runs


def of_role(roles: Sequence[str], values: Sequence[object], role: str) -> List[object]:
    """The values of the steps of ``role`` (lists shorter than ``roles`` are old records: nothing)."""
    if len(values) != len(roles):
        return []
    return [v for r, v in zip(roles, values) if r == role]


@dataclass(frozen=True)
class LoopShares:
    """One loop iteration's parts over the measured steps: data wait, time between and the step (shares of their
    sum), and their medians."""

    wait_share: float
    between_share: float
    step_share: float
    wait_s: float
    between_s: float
    step_s: float
    between_known: bool  # every measured step had its time between
    between_read: bool  # the record holds times between at all (older records do not)


def loop_shares(wait: Sequence[float], between: Sequence[Optional[float]], step: Sequence[float]) -> Optional[
        LoopShares]:
    """The loop's parts over the measured steps (a time between that could not be read counts as none)."""
    if not step or len(wait) != len(step):
        return None
    gaps = [g or 0.0 for g in between] if len(between) == len(step) else [0.0] * len(step)
    total = sum(wait) + sum(gaps) + sum(step)
    if total <= 0:
        return None
    return LoopShares(sum(wait) / total, sum(gaps) / total, sum(step) / total, statistics.median(wait),
                      statistics.median(gaps), statistics.median(step),
                      len(between) == len(step) and all(g is not None for g in between), len(between) == len(step))


@dataclass(frozen=True)
class TraceCost:
    """Median wall and CPU time of the steps traced whole, each divided by the measured steps' median."""

    steps: int
    wall_ratio: float
    cpu_ratio: Optional[float]


def trace_cost(roles: Sequence[str], wall: Sequence[float], cpu: Sequence[float],
               measured_wall: Sequence[float], measured_cpu: Sequence[float]) -> Optional[TraceCost]:
    """What tracing cost a step: the steps traced whole against the measured ones (``None`` without both).

    Example
    -------
    >>> trace_cost(["measured", "traced"], [0.1, 0.25], [0.1, 0.2], [0.1], [0.1])
    TraceCost(steps=1, wall_ratio=2.5, cpu_ratio=2.0)
    """
    traced_wall = of_role(roles, wall, "traced")
    if not traced_wall or not measured_wall:
        return None
    traced_cpu = of_role(roles, cpu, "traced")
    cpu_ratio = None
    if traced_cpu and measured_cpu and statistics.median(measured_cpu) > 0:
        cpu_ratio = statistics.median(traced_cpu) / statistics.median(measured_cpu)
    return TraceCost(len(traced_wall), statistics.median(traced_wall) / statistics.median(measured_wall), cpu_ratio)
