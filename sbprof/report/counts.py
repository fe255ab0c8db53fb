"""Markdown of the count commands: FLOP counts, parameter counts, per-module time (format a summary only).

Module rows nest by name (``· `` per level below the shown depth's root);
rows deeper than ``depth`` are left out of the table (the JSON keeps them).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, TypeVar, Union

from tabulate import tabulate

from sbprof.analysis.counts import CountsSummary, FlopsResult, ModuleFlops, ModuleParams, ParamCount
from sbprof.report.format import bytes_in, sig3
from sbprof.report.modules_markdown import display_names, render_breakdown

TOP_OPERATORS = 15
Row = TypeVar("Row", ModuleFlops, ModuleParams)
REPORT_FILE = "report.md"


def si(value: Optional[float], unit: str) -> str:
    """``12.3 GFLOP``-style text; ``n/a`` for ``None``.

    Example
    -------
    >>> si(1.234e10, "FLOP"), si(999, "FLOP"), si(None, "MAC")
    ('12.3 GFLOP', '999 FLOP', 'n/a')
    """
    if value is None:
        return "n/a"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{sig3(value / factor)} {prefix}{unit}"
    return f"{sig3(value)} {unit}"


def _shown(rows: Sequence[Row], depth: int) -> List[Row]:
    return [r for r in rows if 0 < r.depth <= depth]


def render_flops(count: FlopsResult, depth: int = 2) -> str:
    """Totals, per-module and per-operator rows of a FLOP count (plus per second of audio when it was given).

    Example
    -------
    >>> row = {"calls": 1, "flops": 2_000_000, "macs": 1_000_000, "self_flops": 0, "self_macs": 0}
    >>> count = FlopsResult.from_dict({
    ...     "flops": 2_000_000, "macs": 1_000_000, "backward_flops": None, "backward_macs": None,
    ...     "modules": [{"name": "", "type": "Net", "depth": 0, **row}, {"name": "fc", "type": "Linear", "depth": 1,
    ...                                                               **row, "self_flops": 2_000_000}],
    ...     "operators": [{"name": "aten.mm", "calls": 1, "flops": 2_000_000, "macs": 1_000_000}],
    ...     "untracked": {}, "conventions": "sbprof-flops-1", "audio_s": 4.0})
    >>> text = render_flops(count)
    >>> "forward 2.00 MFLOP (1.00 MMAC)" in text and "500 kFLOP per second of audio" in text
    True
    """
    backward = count.backward_flops is not None
    lines = [f"FLOPs (conventions `{count.conventions}`): forward {si(count.flops, 'FLOP')} "
             f"({si(count.macs, 'MAC')})" + (f", backward {si(count.backward_flops, 'FLOP')} "
                                             f"({si(count.backward_macs, 'MAC')})" if backward else "")]
    if count.per_audio_s is not None:
        lines[0] += f"; {si(count.per_audio_s, 'FLOP')} per second of audio ({sig3(count.audio_s)} s counted)"
    rows = _shown(count.modules, depth)
    if rows:
        names = display_names([r.name for r in rows], [r.depth - 1 for r in rows])
        headers = ["module", "type", "calls", "forward FLOPs", "forward MACs"] + (
            ["backward FLOPs", "backward MACs"] if backward else [])
        table = [[name, r.type, str(r.calls), si(r.flops, ""), si(r.macs, "")]
                 + ([si(r.backward_flops, ""), si(r.backward_macs, "")] if backward else [])
                 for name, r in zip(names, rows)]
        lines += ["", tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)]
    operators = count.ranked
    if operators:
        table = [[r.name, str(r.total_calls), si(r.flops, ""), si(r.backward_flops, "")]
                 for r in operators[:TOP_OPERATORS]]
        lines += ["", f"Operators (top {min(TOP_OPERATORS, len(operators))} of {len(operators)} by FLOPs):", "",
                  tabulate(table, headers=["operator", "calls", "forward FLOPs", "backward FLOPs"],
                           tablefmt="github", disable_numparse=True)]
    if count.untracked:
        lines += ["", "Operators without a FLOP formula (not counted): "
                  + ", ".join(f"`{k}` ({v} calls)" for k, v in count.untracked.items()) + "."]
    return "\n".join(lines) + "\n"


def render_params(count: ParamCount, depth: int = 2) -> str:
    """Totals, bytes per dtype, per-submodule rows and shared tensors of a parameter count.

    Example
    -------
    >>> count = ParamCount.from_dict({"total": 1000, "trainable": 600, "frozen": 400,
    ...     "bytes_by_dtype": {"float32": 4000}, "buffers": 0, "modules": [{"name": "a", "type": "Linear",
    ...     "depth": 1, "total": 1000, "trainable": 600, "own": 1000, "shared": False}], "shared": []})
    >>> "1,000 parameters (600 trainable, 400 frozen); 0.004 MB float32" in render_params(count)
    True
    """
    dtypes = ", ".join(f"{bytes_in('MB', b)} MB {d}" for d, b in count.bytes_by_dtype.items())
    lines = [f"{count.total:,} parameters ({count.trainable:,} trainable, {count.frozen:,} frozen); "
             f"{dtypes or 'no bytes'}; {count.buffers:,} buffer elements."]
    rows = _shown(count.modules, depth)
    if rows:
        names = display_names([r.name for r in rows], [r.depth - 1 for r in rows])
        table = [[name, r.type, f"{r.total:,}", f"{r.trainable:,}", "yes" if r.shared else ""]
                 for name, r in zip(names, rows)]
        lines += ["", tabulate(table, headers=["module", "type", "parameters", "trainable", "shared"],
                               tablefmt="github", disable_numparse=True)]
    for shared in count.shared:
        lines += ["", f"Shared tensor ({shared.numel:,} elements, counted once): {', '.join(shared.names)}."]
    return "\n".join(lines) + "\n"


def render_counts(summary: CountsSummary) -> str:
    """The report of a count command: a heading naming the target and its input, then its tables."""
    head = f"# sbprof {summary.command}: {summary.target}" + (f" ({summary.input})" if summary.input else "")
    outcome = summary.outcome
    if outcome is None:
        return f"{head}\n\nNothing counted yet.\n"
    if outcome.status != "ok":
        return f"{head}\n\n{outcome.status}: {outcome.message}\n"
    if summary.command == "modules":
        body = render_breakdown(summary.breakdown, summary.steps)
    elif summary.params is not None:
        body = render_params(summary.params, summary.depth)
    elif summary.flops is not None:
        body = render_flops(summary.flops, summary.depth)
    else:  # a record marked ok without its result (a hand-edited file)
        body = "No result recorded.\n"
    return f"{head}\n\n{body}"


def render(summary: CountsSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md``: file name -> content."""
    return {REPORT_FILE: render_counts(summary)}
