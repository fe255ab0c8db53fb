"""Markdown tables of a per-module breakdown (:class:`~sbprof.analysis.breakdown.ModuleBreakdown`); formats only.

Rows nest by module name: an inner module is indented (``· `` per level) and
shows its name relative to the row it sits in. One table for the host clock
(with the process CPU time and its cost per audio second when they were
measured), one for the GPU clock on CUDA, one for memory when it was measured.
"""
from __future__ import annotations

from typing import List, Optional

from tabulate import tabulate

from sbprof.analysis.breakdown import ModuleBreakdown, BreakdownSteps
from sbprof.report.format import bytes_in, sig3

TIME_HEADERS = ["module", "type", "calls", "forward ms", "fwd self ms", "backward ms", "bwd self ms", "total ms",
                "share"]
CPU_HEADERS = ["CPU ms", "CPU self ms", "CPU cost"]
NO_AUDIO = "n/a (no audio)"
CPU_DEFINITION = ("CPU ms = the process's CPU time (all its threads) while the row ran, forward + backward, per "
                  "step; CPU cost = CPU ms / 1000 / seconds of audio per step (core-seconds per second of audio): "
                  "what a core spends to serve the module, independent of waiting for one; with several threads it "
                  "includes threads that spin while waiting (OpenMP); on CUDA, the host's launch work only.")
MEMORY_HEADERS = ["module", "params MB", "output MB", "fwd peak MB", "fwd added MB", "bwd peak MB", "bwd added MB"]


def _ms(value: Optional[float]) -> str:
    return "" if value is None else sig3(value)


def _share(value: Optional[float]) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def display_names(labels: List[str], depths: List[int]) -> List[str]:
    """Each label indented by its depth, relative to the closest row it is nested in.

    Example
    -------
    >>> display_names(["enc", "enc.layers.0", "enc.layers.0.ffn", "(other)"], [0, 1, 2, 0])
    ['enc', '· layers.0', '· · ffn', '(other)']
    """
    shown = []
    for label, depth in zip(labels, depths):
        name = label
        if depth:
            parents = [p for p in labels if label.startswith(p + ".")]
            if parents:
                name = label[len(max(parents, key=len)) + 1:]
        shown.append("· " * depth + name)
    return shown


def _cpu_cost(steps: BreakdownSteps, label: str) -> str:
    if steps.audio_s_per_step is None:
        return NO_AUDIO
    cost = steps.cpu_cost.get(label)
    return "" if cost is None else sig3(cost)


def _time_table(data: ModuleBreakdown, prefix: str, steps: Optional[BreakdownSteps] = None) -> str:
    """The table of one clock; with ``steps`` (the host table of a breakdown with CPU times), the CPU columns."""
    rows = data.rows
    names = display_names([r.label for r in rows], [r.depth for r in rows])
    table = []
    for name, r in zip(names, rows):
        if getattr(r, prefix + "total_ms") is None:
            continue
        calls = "" if not r.calls and r.label.startswith("(") else f"{r.calls:g}"
        cpu = [] if steps is None else [_ms(r.cpu_total_ms), _ms(r.cpu_self_ms), _cpu_cost(steps, r.label)]
        table.append([name, r.type, calls] + [_ms(getattr(r, prefix + k)) for k in (
            "forward_ms", "forward_self_ms", "backward_ms", "backward_self_ms", "total_ms")]
            + [_share(getattr(r, prefix + "share"))] + cpu)
    return tabulate(table, headers=TIME_HEADERS + (CPU_HEADERS if steps is not None else []), tablefmt="github",
                    disable_numparse=True)


def _cpu_line(steps: BreakdownSteps) -> str:
    """The step's CPU time and cost, then the definition of the CPU columns."""
    step = f"CPU per step {sig3(steps.cpu_mean_ms)} ms"
    if steps.step_cpu_cost is not None:
        step += (f", CPU cost {sig3(steps.step_cpu_cost)} core-seconds per second of audio "
                 f"({sig3(steps.audio_s_per_step)} s of audio per step)")
    else:
        step += ", CPU cost " + NO_AUDIO
    return f"{step}. {CPU_DEFINITION}"


def _memory_table(data: ModuleBreakdown) -> Optional[str]:
    rows = [r for r in data.rows if r.memory]
    if not rows:
        return None
    names = display_names([r.label for r in rows], [r.depth for r in rows])
    table = []
    for name, r in zip(names, rows):
        m = r.memory or {}
        table.append([name] + [bytes_in("MB", m.get(k)) for k in (
            "params_bytes", "output_bytes", "forward_peak_bytes", "forward_added_bytes", "backward_peak_bytes",
            "backward_added_bytes")])
    return tabulate(table, headers=MEMORY_HEADERS, tablefmt="github", disable_numparse=True)


def render_breakdown(data: ModuleBreakdown, steps: BreakdownSteps) -> str:
    """Markdown of one breakdown, with its step figures (:func:`~sbprof.analysis.breakdown.breakdown_steps`).

    Example
    -------
    >>> data = ModuleBreakdown.from_dict({"step": "train", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 12.0],
    ...         "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 8.0, "share": 0.727,
    ...                   "forward_ms": 3.0, "forward_self_ms": 3.0, "backward_ms": 5.0, "backward_self_ms": 5.0}]})
    >>> from sbprof.analysis.breakdown import breakdown_steps
    >>> text = render_breakdown(data, breakdown_steps(data))
    >>> "| enc      | Enc    | 1       | 3.00         | 3.00          | 5.00          | 5.00          | 8.00       | 72.7%   |" in text
    True
    """
    stats, count = steps.step, data.steps
    lines = [f"Per-module time of step `{data.step}` ({data.mode} mode), mean over {count} "
             f"step{'s' if count != 1 else ''}: step {sig3(steps.mean_ms)} ms "
             f"(median {sig3(stats.median)} [{sig3(stats.q1)}, {sig3(stats.q3)}]). Milliseconds per step; "
             "total = forward + backward; self = not in the rows nested under it; share = total / step; "
             "`(other)` = the step outside every row (code between modules, data moves, the hooks).", ""]
    cpu = steps.cpu_mean_ms is not None
    if cpu:
        lines += [_cpu_line(steps), ""]
    lines += ["Host clock:", "", _time_table(data, "", steps if cpu else None)]
    if steps.cuda_mean_ms is not None:
        lines += ["", f"GPU clock (CUDA events on the current stream; step {sig3(steps.cuda_mean_ms)} ms):", "",
                  _time_table(data, "cuda_")]
    memory = _memory_table(data)
    if memory is not None:
        lines += ["", "Memory (one separate step under torch's MemTracker; tracked tensors only; peak = all "
                  "tracked memory at the highest point while the module ran; added = that minus what was in "
                  "use when it began):", "", memory]
        peak = data.memory_peak or {}
        if peak:
            parts = ", ".join(f"{k.lower()} {bytes_in('MB', v)} MB" for k, v in peak.items() if k != "Total" and v)
            lines += ["", f"Step peak {bytes_in('MB', peak.get('Total'))} MB: {parts}."]
        if data.memory_note:
            lines += ["", data.memory_note]
    if data.note:
        lines += ["", data.note]
    if data.never_ran:
        lines += ["", "Selected but never called: " + ", ".join(data.never_ran) + "."]
    return "\n".join(lines) + "\n"
