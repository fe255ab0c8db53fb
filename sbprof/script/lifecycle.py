"""The life of a stage under ``sbprof run``: which of its steps is warm-up, measured, or serves one other figure.

Each figure comes from steps where nothing else runs that would change it:

1. ``warmup`` steps, left out of every figure; the last one runs under the FLOP
   counter (``flops``), which slows the step it watches;
2. ``measured`` steps, with no profiler and no per-module hooks: step time, CPU
   time, data wait, time between, the forward/backward/optimiser split;
3. one ``memory`` step: the heap handed back to the system and the peak mark reset
   at its start (a trim makes the next step fault its pages in again: 6x the
   time of a step allocating 300 MB in 64 KiB pieces, measured), its peak read at
   its end;
4. ``modules`` steps under the light per-module attribution;
5. a ``flops`` step here when there was no warm-up step to carry it;
6. ``traced`` steps, under torch's profiler (the trace, its cost).

Example
-------
>>> plan = stage_plan(warmup=2, measured=3)
>>> [plan.role(i) for i in range(plan.total + 1)]  # doctest: +NORMALIZE_WHITESPACE
['warmup', 'flops', 'measured', 'measured', 'measured', 'memory', 'modules', 'modules', 'traced', 'traced', None]
>>> small = stage_plan(warmup=2, measured=5, batches=2)  # a test stage of 2 batches
>>> [small.role(i) for i in range(2)], small.shrunk
(['flops', 'measured'], 'the stage has 2 batches, fewer than --warmup 2 + 1: measured with 1 warm-up step')
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, List, Optional

MEMORY_STEPS = 1
MODULE_STEPS = 2
TRACED_STEPS = 2
ROLES = ("warmup", "flops", "measured", "memory", "modules", "traced")
FIGURE_ROLES = {"flops": "FLOPs and operators per step", "memory": "peak memory", "modules": "per-module time",
                "traced": "the trace"}


@dataclass(frozen=True)
class StagePlan:
    """How many steps of each role a stage gets, in the order of the module docstring."""

    warmup: int
    measured: int
    memory: int = MEMORY_STEPS
    modules: int = MODULE_STEPS
    traced: int = TRACED_STEPS
    flops_after: bool = False  # the FLOP step comes after the measured ones (no warm-up step to carry it)
    shrunk: Optional[str] = None  # why the stage got fewer steps than asked for

    @functools.cached_property
    def sequence(self) -> List[str]:
        """Every step's role, in order (built once: it is read at every step)."""
        warmup = ["warmup"] * self.warmup
        if warmup and not self.flops_after:
            warmup[-1] = "flops"
        return (warmup + ["measured"] * self.measured + ["memory"] * self.memory + ["modules"] * self.modules
                + ["flops"] * self.flops_after + ["traced"] * self.traced)

    @functools.cached_property
    def last(self) -> Dict[str, int]:
        """The index of each role's last step."""
        return {role: i for i, role in enumerate(self.sequence)}

    @functools.cached_property
    def total(self) -> int:
        return len(self.sequence)

    def role(self, index: int) -> Optional[str]:
        """The role of the stage's step ``index`` (0-based), ``None`` past the plan."""
        sequence = self.sequence
        return sequence[index] if index < len(sequence) else None


def stage_plan(warmup: int, measured: int, batches: Optional[int] = None, trace: bool = True) -> StagePlan:
    """The plan of a stage, fitted to ``batches`` when the stage will have no more (a test stage: one pass).

    Measured steps come first: a stage with fewer batches than ``warmup + 1`` gets a smaller warm-up (one batch
    still gives a measured step), then as many measured steps as fit; the steps of the other figures follow in the
    module docstring's order while batches remain.

    Example
    -------
    >>> stage_plan(0, 5).sequence[-6:]  # no warm-up step: the FLOP step comes before the traced ones
    ['memory', 'modules', 'modules', 'flops', 'traced', 'traced']
    >>> p = stage_plan(2, 5, batches=8, trace=False)
    >>> p.measured, p.memory, p.modules, p.traced
    (5, 1, 0, 0)
    """
    traced = TRACED_STEPS if trace else 0
    full = StagePlan(warmup, measured, traced=traced, flops_after=warmup == 0)
    if batches is None or batches >= full.total:
        return full
    batches = max(1, batches)
    shrunk_warmup = min(warmup, batches - 1)
    why = None
    if shrunk_warmup < warmup:
        why = (f"the stage has {batches} batch{'es' * (batches != 1)}, fewer than --warmup {warmup} + 1: measured "
               f"with {shrunk_warmup} warm-up step{'s' * (shrunk_warmup != 1)}")
    left = batches - shrunk_warmup
    taken = min(measured, left)
    left -= taken
    if why is None and taken < measured:
        why = f"the stage has {batches} batches: {taken} measured of --measured {measured}"
    extras = {}
    for role, wanted in (("memory", MEMORY_STEPS), ("modules", MODULE_STEPS), ("flops", int(shrunk_warmup == 0)),
                         ("traced", traced)):
        extras[role] = min(wanted, left)
        left -= extras[role]
    return StagePlan(shrunk_warmup, taken, extras["memory"], extras["modules"], extras["traced"],
                     flops_after=bool(extras["flops"]), shrunk=why)


def relabelled(roles: List[str]) -> Optional[List[str]]:
    """The roles of a stage that ended with no measured step: its last plain warm-up step becomes the measured one
    (the FLOP step is never measured: the counter slowed it); ``None`` when no plain warm-up step ran.

    Example
    -------
    >>> relabelled(["warmup", "flops"]), relabelled(["warmup", "warmup"]), relabelled(["flops"])
    (['measured', 'flops'], ['warmup', 'measured'], None)
    """
    plain = [i for i, role in enumerate(roles) if role == "warmup"]
    if not plain or "measured" in roles:
        return None
    return [("measured" if i == plain[-1] else role) for i, role in enumerate(roles)]
