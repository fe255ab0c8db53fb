"""Per-module attribution's result (:class:`~sbprof.record.breakdown.ModuleBreakdown`), built from step timelines.

Times are milliseconds per step: the mean over the reported steps, so rows add up (see the record type).
The process CPU clock gives each row its CPU total and self time (forward plus backward, as the host clock's
``total_ms``), and ``(other)`` / ``optimizer`` their CPU time.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

from sbprof.measuring.modules.timeline import LabelTimes, StepTimeline, label_times, top_level_time
from sbprof.record.breakdown import ModuleBreakdown, ModuleRow

OTHER = "(other)"
"""The row holding the step's time outside every selected module and optimiser step."""
OPTIMIZER = "optimizer"


def nesting_depth(names: Sequence[str]) -> Dict[str, int]:
    """How many of the other names are ancestors of each name (its indentation).

    Example
    -------
    >>> nesting_depth(["enc", "enc.layers.0", "enc.layers.0.ffn", "dec"])
    {'enc': 0, 'enc.layers.0': 1, 'enc.layers.0.ffn': 2, 'dec': 0}
    """
    chosen = set(names)
    depth = {}
    for name in names:
        parts = name.split(".")
        depth[name] = sum(".".join(parts[:i]) in chosen for i in range(1, len(parts)))
    return depth


def _summed(timelines: Sequence[StepTimeline]) -> Dict[str, LabelTimes]:
    total: Dict[str, LabelTimes] = {}
    for timeline in timelines:
        for label, times in label_times(timeline).items():
            total.setdefault(label, LabelTimes()).add(times)
    return total


def _optimizer_time(timelines: Sequence[StepTimeline]) -> float:
    return sum(float(end - start) for t in timelines for _, start, end in t.spans)


def _cpu_rows(rows: Dict[str, ModuleRow], extra_rows: Dict[str, ModuleRow], cpu: Sequence[StepTimeline]) -> None:
    """CPU total and self ms per step of each row, from the process CPU clock (ns) read at the host clock's points."""
    n = len(cpu)
    has_backward = any(t.marks for t in cpu)
    summed = _summed(cpu)
    for name, row in rows.items():
        times = summed[name]
        backward, backward_self = (times.backward, times.backward_self) if has_backward else (0.0, 0.0)
        row.cpu_total_ms = (times.forward + backward) / 1e6 / n
        row.cpu_self_ms = (times.forward_self + backward_self) / 1e6 / n
    step = sum(float(t.end - t.start) for t in cpu)
    values = {OPTIMIZER: _optimizer_time(cpu), OTHER: step - sum(top_level_time(t) for t in cpu)}
    for label, row in extra_rows.items():
        row.cpu_total_ms = row.cpu_self_ms = values[label] / 1e6 / n


def build_breakdown(step: str, mode: str, names: Sequence[str], types: Dict[str, str],
                    host: Sequence[StepTimeline], cuda: Optional[Sequence[StepTimeline]] = None,
                    cpu: Optional[Sequence[StepTimeline]] = None) -> ModuleBreakdown:
    """Rows from the timelines of several steps: host clock in ns, CUDA clock in ms, process CPU clock in ns.

    Example
    -------
    >>> from sbprof.measuring.modules.timeline import Call
    >>> t = StepTimeline("s", 0, 10_000_000, calls=[Call("a", None, 0, 4_000_000)], seq_starts=[0], seq_owners=[None])
    >>> c = StepTimeline("s", 0, 9_000_000, calls=[Call("a", None, 0, 3_000_000)], seq_starts=[0], seq_owners=[None])
    >>> b = build_breakdown("s", "light", ["a"], {"a": "Linear"}, [t], cpu=[c])
    >>> b.row("a").forward_ms, b.row("a").backward_ms, b.row("(other)").total_ms
    (4.0, None, 6.0)
    >>> b.row("a").cpu_total_ms, b.row("(other)").cpu_total_ms, b.cpu_step_ms_samples
    (3.0, 6.0, [9.0])
    """
    n = len(host)
    # Rows in the order modules first ran (registration order can differ from execution order).
    first = {c.name: i for i, c in reversed(list(enumerate(c for t in host for c in t.calls)))}
    names = sorted(names, key=lambda name: first.get(name, len(first)))
    depth = nesting_depth([name for name in names if name in first])
    clocks = [("", host, 1e6)] + ([("cuda_", cuda, 1.0)] if cuda is not None else [])
    rows: Dict[str, ModuleRow] = {}
    extra_rows: Dict[str, ModuleRow] = {}
    for prefix, timelines, per_ms in clocks:
        step_ms = [float(t.end - t.start) / per_ms for t in timelines]
        mean_step = sum(step_ms) / n
        has_backward = any(t.marks for t in timelines)
        summed = _summed(timelines)
        for name in names:
            times = summed.get(name)
            if times is None:
                continue
            row = rows.setdefault(name, ModuleRow(name, types.get(name, ""), depth[name], times.calls / n, 0.0, 0.0))
            forward, backward = times.forward / per_ms / n, times.backward / per_ms / n
            total = forward + (backward if has_backward else 0.0)
            values = {"total_ms": total, "share": total / mean_step if mean_step else 0.0,
                      "forward_ms": forward, "forward_self_ms": times.forward_self / per_ms / n}
            if has_backward:
                values.update(backward_ms=backward, backward_self_ms=times.backward_self / per_ms / n)
            for key, value in values.items():
                setattr(row, prefix + key, value)
        optimizer = _optimizer_time(timelines) / per_ms / n
        other = mean_step - sum(top_level_time(t) for t in timelines) / per_ms / n
        for label, value, calls in ((OPTIMIZER, optimizer, sum(len(t.spans) for t in timelines) / n),
                                    (OTHER, other, 0.0)):
            if label == OPTIMIZER and not calls:
                continue
            row = extra_rows.setdefault(label, ModuleRow(label, "", 0, calls, 0.0, 0.0))
            setattr(row, prefix + "total_ms", value)
            setattr(row, prefix + "share", value / mean_step if mean_step else 0.0)
    if cpu is not None:
        _cpu_rows(rows, extra_rows, cpu)
    return ModuleBreakdown(
        step=step, mode=mode, steps=n, step_ms_samples=[float(t.end - t.start) / 1e6 for t in host],
        cuda_step_ms_samples=[float(t.end - t.start) for t in cuda] if cuda is not None else None,
        cpu_step_ms_samples=[float(t.end - t.start) / 1e6 for t in cpu] if cpu is not None else None,
        rows=list(rows.values()) + list(extra_rows.values()),
        never_ran=[name for name in names if name not in rows])
