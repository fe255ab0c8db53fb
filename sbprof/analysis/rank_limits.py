"""What limits a distributed run, section by section: a straggler, communication, data loading, and when the
machine was too crowded to tell from wall time.

Thresholds are the common table's (:data:`sbprof.analysis.limits.THRESHOLDS`). Per section:

- **crowded** (a host's rank threads outnumber the cores other work left it, :mod:`sbprof.analysis.rank_load`):
  every wall-time figure holds some waiting for a core, so the communication and data-loading rules withhold and
  say why (as the sweep withholds its timing verdicts on an oversubscribed setting). The straggler rule then
  judges own work by CPU time per step, which that wait does not stretch: the rank with the most CPU time per
  step is named when its excess over the median rank's is above the threshold (a share of the step, per thread
  of a rank); balanced ranks are not, however long one of them waited for a core. Its cost is that CPU excess.
- **not crowded**: the straggler from busy time (step time less the wait for the others), its cost the step time
  saved if it ran at the median rank's pace, printed with the load it was measured at and its CPU excess;
  communication from each rank's time in collectives less its wait for slower ranks; data loading from the data
  wait's share of the loop where the steps carry it (``sbprof run``), else from the time between steps.
- a section whose steps hold no communication (an evaluation without collectives) has no straggler verdict: no
  rank waits for another there, step by step.

With several sections each sentence names its section. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from typing import List, Optional, Sequence

from sbprof.analysis.limits import THRESHOLDS, Figure, Limits, Verdict, communication, data_loading, limits, straggler
from sbprof.analysis.rank_load import HostLoad
from sbprof.analysis.rank_sections import SectionSummary, loop_s


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _crowded(s: SectionSummary) -> Optional[HostLoad]:
    return s.crowding if s.crowding is not None and s.crowding.crowded else None


def _load_figure(load: Optional[HostLoad]) -> List[Figure]:
    return [] if load is None or load.others is None else [Figure("other work", load.others, "cores")]


def _wall_straggler(s: SectionSummary, step_s: float) -> Optional[Verdict]:
    """Not crowded: the slowest rank by busy time, its cost in step time, with the load and its CPU excess."""
    v = straggler(s.slowest.rank, s.straggler_cost.seconds, step_s)
    if v is None:
        return None
    excess = s.cpu_excess
    if excess is None:
        cpu = ""
    elif excess.rank == s.slowest.rank:
        cpu = f"; its CPU time per step exceeds the median rank's by {_ms(excess.seconds)}"
    else:
        cpu = ("; its CPU time per step is not the highest, so the extra time is no CPU work of its own (input or "
               "output, a device, a lock, a sleep)")
    load = f" (measured at {s.crowding.describe()}{cpu})" if s.crowding is not None else ""
    figures = v.figures + ([Figure("CPU excess", excess.seconds, "s")] if excess is not None else [])
    return replace(v, sentence=v.sentence[:-1] + load + ".", figures=figures + _load_figure(s.crowding))


def _cpu_straggler(s: SectionSummary, load: HostLoad, step_s: float) -> Optional[Verdict]:
    """Crowded: the rank with the most CPU time per step, when its excess passes the threshold."""
    excess = s.cpu_excess
    if excess is None or step_s <= 0:
        return None
    v = straggler(excess.rank, excess.seconds, step_s * excess.threads)
    if v is None:
        return None
    busy = (f"; its busy time read {_ms(s.straggler_cost.seconds)} per step over the others' at that load"
            if s.straggler_cost is not None and s.slowest is not None and s.slowest.rank == excess.rank else "")
    share = excess.seconds / (step_s * excess.threads)
    return replace(v, sentence=f"Rank {excess.rank} does the most work: {_ms(excess.seconds)} more CPU time per step "
                               f"than the median rank, {share * 100:.0f} % of the {_ms(step_s)} step (judged on CPU "
                               f"time, as the machine was crowded: {load.describe()}{busy}).",
                   figures=[Figure("CPU excess", excess.seconds, "s"), Figure("step", step_s, "s")]
                   + _load_figure(load))


def _crowded_undecided(s: SectionSummary, load: HostLoad, withheld: List[str], straggler_judged: bool) -> str:
    """One line for a crowded section: the rules withheld, and what CPU time said of a straggler."""
    parts = []
    if withheld:
        parts.append(f"no {' or '.join(withheld)} verdict, as those times hold waiting for a core")
    if straggler_judged:
        parts.append(f"straggler judged on CPU time per step, which that wait does not stretch: the most "
                     f"(rank {s.cpu_excess.rank}) is {_ms(s.cpu_excess.seconds)} over the median rank's, under "
                     f"{THRESHOLDS['straggler'].value * 100:.0f} % of the step, so no rank is named"
                     if s.cpu_excess is not None else
                     "no straggler verdict: differences in busy time hold waiting for a core, and the steps carry no "
                     "CPU time to judge own work by")
    return f"{s.key}: the machine was crowded ({load.describe()}): " + "; ".join(parts)


def _between(v: Optional[Verdict]) -> Optional[Verdict]:
    """The data-loading verdict on the time between steps: it holds the data wait, and whatever else the loop does
    there, so it is named as what it is."""
    if v is None:
        return None
    wait, step, share = (f.value for f in v.figures)
    return replace(v, sentence=f"The time between steps (data loading and the loop's other work) takes "
                               f"{share * 100:.0f} % of each step ({wait * 1e3:.3g} ms beside a {step * 1e3:.3g} ms "
                               "step).",
                   figures=[Figure("between steps", wait, "s"), Figure("step", step, "s"),
                            Figure("between share", share, "share")])


def _data_wait(s: SectionSummary) -> Optional[Verdict]:
    """The data-loading verdict on the data wait (``sbprof run``): its share of the loop (step + time between)."""
    loop = loop_s(s.data_wait_step_s, s.between_s, s.data_wait_s)
    v = data_loading(s.data_wait_s, loop - s.data_wait_s)
    if v is None:
        return None
    return replace(v, sentence=f"Waiting for data takes {v.figures[2].value * 100:.0f} % of each loop iteration "
                               f"({_ms(s.data_wait_s)} of {_ms(loop)}: the step and the time between steps).",
                   figures=[Figure("data wait", s.data_wait_s, "s"), Figure("loop", loop, "s"),
                            Figure("data wait share", v.figures[2].value, "share")])


def _own_comm(v: Optional[Verdict]) -> Optional[Verdict]:
    """The communication verdict on each rank's communication less its wait for slower ranks: the wait is the
    straggler's cost (its own verdict), not the cost of moving gradients."""
    if v is None:
        return None
    return replace(v, sentence=v.sentence.replace("Communication takes", "Communication, less the wait for slower "
                                                  "ranks, takes", 1),
                   figures=[replace(v.figures[0], name="communication less wait")] + v.figures[1:])


def section_limits(sections: Sequence[SectionSummary]) -> Limits:
    """What limits each section (see the module docstring).

    Example
    -------
    >>> s = SectionSummary("train.py", 2, [], [], [], None, None, None, None, None, None, None, None, None,
    ...                    step_s=0.1, comm_s=0.01, comm_step_s=0.1, between_s=0.0, between_step_s=0.1)
    >>> section_limits([s]).verdicts
    []
    """
    candidates: List[Optional[Verdict]] = []
    undecided = []
    for s in sections:
        def named(v: Optional[Verdict]) -> Optional[Verdict]:
            return v if v is None or len(sections) == 1 else replace(v, sentence=f"`{s.key}`: {v.sentence}")
        crowded = _crowded(s)
        withheld: List[str] = []
        unjudged = False  # crowded, and CPU time named no straggler
        step = s.throughput.step_s if s.throughput is not None else s.step_s
        measured = [r.comm_s for r in s.rows if r.comm_s is not None]
        if measured and not any(measured):
            undecided.append(f"straggler ({s.key}): its steps hold no communication, so no rank waits for another "
                             "within a step")
        elif crowded is not None and s.rows and s.world_size > 1:
            verdict = _cpu_straggler(s, crowded, step or 0.0)
            candidates.append(named(verdict))
            unjudged = verdict is None
        elif s.slowest is not None and s.straggler_cost is not None:
            candidates.append(named(_wall_straggler(s, step or 0.0)))
        elif s.world_size > 1 and s.rows:
            undecided.append(f"straggler ({s.key}): no step that every rank reported")
        own = [r.comm_s - (r.wait_s or 0.0) for r in s.rows if r.comm_s is not None]
        if own and any(own) and s.comm_step_s:
            if crowded is not None:
                withheld.append("communication")
            else:
                candidates.append(named(_own_comm(communication(statistics.median(own), s.comm_step_s))))
        if crowded is not None and (s.data_wait_s or s.between_s):
            withheld.append("data loading")
        elif crowded is None and s.data_wait_s is not None and s.data_wait_step_s is not None:
            candidates.append(named(_data_wait(s)))
        elif crowded is None and s.between_s is not None and s.between_step_s is not None:
            candidates.append(named(_between(data_loading(s.between_s, s.between_step_s))))
        if crowded is not None and (withheld or unjudged):
            undecided.append(_crowded_undecided(s, crowded, withheld, unjudged))
    return limits(candidates, undecided)
