"""Markdown report of ``sbprof run``: per stage, step time, throughput, where the time goes, modules, FLOPs,
memory, parameters and traces, each figure defined beside it. Formats :class:`~sbprof.analysis.run.RunReport`
only; never measures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from tabulate import tabulate

from sbprof.analysis.breakdown import ModuleRow
from sbprof.analysis.run import DEFINITIONS, OTHER, RunReport, StageFigures
from sbprof.report.counts import si
from sbprof.report.format import bytes_in, machine_line, sig3
from sbprof.report.limits import render_limits

REPORT_FILE = "report.md"
TOP_MODULES = 10


def _share(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _na(s: StageFigures, role: str) -> str:
    """``n/a`` and why (the stage's reason for the figure of ``role``)."""
    why = s.why.get(role)
    return f"n/a ({why})" if why else "n/a"


def _memory(s: StageFigures) -> str:
    memory = s.memory
    if memory is not None and memory.peak_cuda_bytes is not None:
        return (f"{bytes_in('MB', memory.peak_cuda_bytes)} MB allocated at peak "
                f"(+{bytes_in('MB', memory.peak_cuda_delta_bytes)} MB over the step's start)")
    if memory is None or memory.peak_rss_bytes is None:
        return _na(s, "memory")
    return (f"{bytes_in('MB', memory.peak_rss_bytes)} MB resident at peak "
            f"(+{bytes_in('MB', memory.peak_rss_delta_bytes)} MB over the step's start; {memory.rss_method})")


def _steps(s: StageFigures) -> str:
    if not s.role_runs:
        return "n/a (results from an sbprof that did not record them)"
    return ", ".join(f"{first}" + (f"-{last}" if last > first else "") + f" {name}" for name, first, last in
                     s.role_runs)


def _loop(s: StageFigures) -> str:
    loop = s.loop
    if loop is None:
        return "n/a (no DataLoader fed the steps)"
    unknown = "" if loop.between_known else "; between not read on every step (no DataLoader after another stage)"
    return (f"{_share(loop.wait_share)} / {_share(loop.between_share)} / {_share(loop.step_share)} "
            f"({_ms(loop.wait_s)} / {_ms(loop.between_s)} / {_ms(loop.step_s)} ms, medians{unknown})")


def _ms(seconds: float) -> str:
    return sig3(seconds * 1e3)


def _trace(s: StageFigures) -> str:
    trace = s.trace
    if trace is None or not trace.files:
        return _na(s, "traced")
    files = ", ".join(f"`{Path(f).name}`" for f in trace.files)
    cost = s.trace_cost
    line = f"{files}: {trace.events:,} events (cap {trace.cap:,})"
    if trace.cut_in_step is not None:
        line += f", cut inside step {trace.cut_in_step + 1} at the cap"
    if cost is not None:
        cpu = "" if cost.cpu_ratio is None else f", {sig3(cost.cpu_ratio)}x its CPU time"
        line += (f"; a step traced whole took {sig3(cost.wall_ratio)}x the measured steps' median time{cpu} "
                 f"({cost.steps} step{'s' * (cost.steps != 1)})")
    return line


def _untracked(s: StageFigures) -> str:
    return f" (not counted, no formula: {', '.join(s.untracked)})" if s.untracked else ""


def summary_table(s: StageFigures) -> str:
    """The stage's figures, one row each."""
    step = s.step
    rows = [["steps (by role)", _steps(s)],
            ["step time, median [q1, q3]", f"{sig3(step.median)} s [{sig3(step.q1)}, {sig3(step.q3)}] over "
                                           f"{step.count} measured steps ({s.warmup} warm-up left out)"],
            ["steps per second", sig3(s.steps_per_s)],
            ["utterances per second", "n/a (no PaddedBatch lengths)" if s.utterances_per_s is None
             else sig3(s.utterances_per_s)],
            ["audio seconds per second", "n/a (no PaddedBatch lengths)" if s.audio_s_per_s is None
             else f"{sig3(s.audio_s_per_s)} s/s"]]
    if s.kind == "inference" and s.rtf is not None:
        rows.append(["RTF / RTFx", f"{sig3(s.rtf)} / {sig3(s.rtfx)}"])
    if s.cpu_step is not None:
        cpu = s.cpu_step
        rows.append(["CPU time per step, median [q1, q3]", f"{sig3(cpu.median)} s [{sig3(cpu.q1)}, {sig3(cpu.q3)}]"])
    if s.cpu_cost is not None:
        rows.append(["CPU cost (core-seconds per audio second)", sig3(s.cpu_cost)])
    rows += [["loop: data wait / between / step (share of the loop)", _loop(s)],
             ["operators per step; CPU per operator (dispatch floor)", _na(s, "flops")
              if s.cpu_per_operator_s is None else f"{s.operators_per_step:,.0f}; "
              f"{sig3(s.cpu_per_operator_s * 1e6)} µs ({sig3(s.dispatch_floor_s * 1e6)} µs)"],
             ["forward / backward / optimiser (share of step)",
              f"{_share(s.forward_share)} / {_share(s.backward_share)} / {_share(s.optimizer_share)}"],
             ["FLOPs per step (all counted operators)", _na(s, "flops") if s.flops_per_step is None
              else si(s.flops_per_step, "FLOP") + _untracked(s)],
             ["achieved FLOP/s", _na(s, "flops") if s.achieved_flops_per_s is None
              else si(s.achieved_flops_per_s, "FLOP/s")],
             ["share of the device's peak", "n/a" + (" (no FLOPs)" if s.flops_per_step is None else
                                                     f" ({s.peak_source})" if s.peak_source else
                                                     " (no peak: see the notes)")
              if s.share_of_peak is None else f"{sig3(100 * s.share_of_peak)}% (peak {s.peak_source})"],
             ["peak memory (memory step)", _memory(s)],
             ["per-module time", "below" if s.modules else _na(s, "modules")],
             ["trace (traced steps)", _trace(s)]]
    if s.params is not None:
        rows.append(["parameters", f"{s.params:,} ({s.trainable_params or 0:,} trainable)"])
    return tabulate(rows, headers=["figure", "value"], tablefmt="github", disable_numparse=True)


def _top(rows: List[ModuleRow]) -> List[ModuleRow]:
    """The first :data:`TOP_MODULES` modules, then the rows that are not modules (``(other)``)."""
    modules = [r for r in rows if r.label != OTHER]
    return modules[:TOP_MODULES] + [r for r in rows if r.label == OTHER]


def _cpu_cells(s: StageFigures, r: ModuleRow) -> List[str]:
    steps = s.modules_steps
    if steps is None or steps.audio_s_per_step is None:
        cost = "n/a (no audio)"
    else:
        cost = "n/a" if r.label not in steps.cpu_cost else sig3(steps.cpu_cost[r.label])
    return ["n/a" if r.cpu_total_ms is None else f"{r.cpu_total_ms:.2f}", cost]


def modules_table(s: StageFigures) -> Optional[str]:
    """The modules taking the most time per step, largest first (with their CPU time and cost when measured)."""
    if not s.modules:
        return None
    cpu = any(r.cpu_total_ms is not None for r in s.modules)
    table = [[r.label, r.type, f"{r.total_ms:.2f}", "n/a" if r.forward_ms is None else f"{r.forward_ms:.2f}",
              "n/a" if r.backward_ms is None else f"{r.backward_ms:.2f}", f"{100 * r.share:.1f}%"]
             + (_cpu_cells(s, r) if cpu else []) for r in _top(s.modules)]
    return tabulate(table, headers=["module", "type", "ms per step", "forward ms", "backward ms", "share of step"]
                    + (["CPU ms", "CPU cost"] if cpu else []), tablefmt="github", disable_numparse=True)


def params_table(s: StageFigures) -> Optional[str]:
    rows = s.params_rows
    if not rows:
        return None
    table = [[r.name, r.type, f"{r.total:,}", f"{r.trainable:,}"] for r in rows]
    return tabulate(table, headers=["module", "type", "parameters", "trainable"], tablefmt="github",
                    disable_numparse=True)


def render_stage(s: StageFigures) -> List[str]:
    brain = f", Brain {s.brain.number}: {s.brain.class_name}" if s.brain is not None and s.brain.number > 1 else ""
    lines = [f"## Stage `{s.stage}` ({s.kind}{brain})", ""] + [f"- {note}" for note in s.notes]
    lines += [""] if s.notes else []
    if s.step is None:
        return lines + [f"No step could be measured: the stage ran {_steps(s)} (the FLOP-counting "
                        "step is never measured); a lower --warmup, or more batches, measures some.", ""]
    lines += [summary_table(s), ""]
    for title, table in (("Per-module time (top first)", modules_table(s)), ("Parameters per module",
                                                                             params_table(s))):
        if table is not None:
            lines += [f"### {title}", "", table, ""]
    return lines


def render_run(report: RunReport) -> str:
    """The whole report.

    Example
    -------
    >>> from sbprof.analysis.run import analyse
    >>> from sbprof.record import Results
    >>> render_run(analyse(Results("run", rules={"script": "train.py", "args": []}))).splitlines()[0]
    '# sbprof run: train.py'
    """
    rules, machine = report.rules, report.machine
    target = rules.script or f"-m {rules.module}"
    lines = [f"# sbprof run: {target}", "",
             f"- **Command**: `{target} {' '.join(rules.args)}`".rstrip() + "; "
             f"{rules.warmup} warm-up + {rules.measured} measured steps per stage"
             f"{', then the script went on (--continue)' if report.continued else ''}",
             f"- **Machine**: {machine_line(machine)}"]
    lines += [f"- {note}" for note in report.notes] + [""]
    for stage in report.stages:
        lines += render_stage(stage)
    traces = report.traces
    if traces:
        lines += ["## Trace", "", "torch.profiler traces of each stage's traced steps (Perfetto, chrome://tracing or "
                  "TensorBoard): " + ", ".join(f"`{Path(t).name}`" for t in traces) + " in `traces/`.", ""]
    lines += ["## Definitions", ""] + [f"- **{k}**: {v}" for k, v in DEFINITIONS.items()] + [""]
    lines += [render_limits(report.limits), ""]
    return "\n".join(lines)


def render(report: RunReport) -> Dict[str, str]:
    """``report.md``, by file name."""
    return {REPORT_FILE: render_run(report)}
