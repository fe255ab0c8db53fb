"""Markdown of the count commands: FLOP counts, parameter counts, per-module time (format a summary only).

Module rows nest by name (``· `` per level below the shown depth's root);
rows deeper than ``depth`` are left out of the table (the JSON keeps them).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from tabulate import tabulate

from sbprof.analysis.counts import CountsSummary
from sbprof.report.format import bytes_in, sig3
from sbprof.report.modules_markdown import display_names, render_breakdown

TOP_OPERATORS = 15
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


def _shown(rows: List[Dict[str, Any]], depth: int) -> List[Dict[str, Any]]:
    return [r for r in rows if 0 < r["depth"] <= depth]


def render_flops(data: Dict[str, Any], depth: int = 2) -> str:
    """Totals, per-module and per-operator rows of a FLOP count (plus ``audio_s`` when it was given).

    Example
    -------
    >>> data = {"flops": 2_000_000, "macs": 1_000_000, "backward_flops": None, "backward_macs": None,
    ...         "modules": [{"name": "", "type": "Net", "depth": 0, "calls": 1, "flops": 2_000_000, "macs": 1_000_000,
    ...                      "self_flops": 0, "self_macs": 0},
    ...                     {"name": "fc", "type": "Linear", "depth": 1, "calls": 1, "flops": 2_000_000,
    ...                      "macs": 1_000_000, "self_flops": 2_000_000, "self_macs": 1_000_000}],
    ...         "operators": [{"name": "aten.mm", "calls": 1, "flops": 2_000_000, "macs": 1_000_000}],
    ...         "untracked": {}, "conventions": "sbprof-flops-1", "audio_s": 4.0}
    >>> text = render_flops(data)
    >>> "forward 2.00 MFLOP (1.00 MMAC)" in text and "500 kFLOP per second of audio" in text
    True
    """
    backward = data.get("backward_flops") is not None
    lines = [f"FLOPs (conventions `{data.get('conventions')}`): forward {si(data['flops'], 'FLOP')} "
             f"({si(data['macs'], 'MAC')})" + (f", backward {si(data['backward_flops'], 'FLOP')} "
                                             f"({si(data['backward_macs'], 'MAC')})" if backward else "")]
    if data.get("audio_s"):
        total = data["flops"] + (data["backward_flops"] or 0)
        lines[0] += f"; {si(total / data['audio_s'], 'FLOP')} per second of audio ({sig3(data['audio_s'])} s counted)"
    rows = _shown(data.get("modules") or [], depth)
    if rows:
        names = display_names([r["name"] for r in rows], [r["depth"] - 1 for r in rows])
        headers = ["module", "type", "calls", "forward FLOPs", "forward MACs"] + (
            ["backward FLOPs", "backward MACs"] if backward else [])
        table = [[name, r["type"], str(r["calls"]), si(r["flops"], ""), si(r["macs"], "")]
                 + ([si(r.get("backward_flops"), ""), si(r.get("backward_macs"), "")] if backward else [])
                 for name, r in zip(names, rows)]
        lines += ["", tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)]
    operators = sorted(data.get("operators") or [], key=lambda r: -(r["flops"] + r.get("backward_flops", 0)))
    if operators:
        table = [[r["name"], str(r["calls"] + r.get("backward_calls", 0)), si(r["flops"], ""),
                  si(r.get("backward_flops", 0), "")] for r in operators[:TOP_OPERATORS]]
        lines += ["", f"Operators (top {min(TOP_OPERATORS, len(operators))} of {len(operators)} by FLOPs):", "",
                  tabulate(table, headers=["operator", "calls", "forward FLOPs", "backward FLOPs"],
                           tablefmt="github", disable_numparse=True)]
    if data.get("untracked"):
        lines += ["", "Operators without a FLOP formula (not counted): "
                  + ", ".join(f"`{k}` ({v} calls)" for k, v in data["untracked"].items()) + "."]
    return "\n".join(lines) + "\n"


def render_params(data: Dict[str, Any], depth: int = 2) -> str:
    """Totals, bytes per dtype, per-submodule rows and shared tensors of a parameter count.

    Example
    -------
    >>> data = {"total": 1000, "trainable": 600, "frozen": 400, "bytes_by_dtype": {"float32": 4000},
    ...         "buffers": 0, "modules": [{"name": "a", "type": "Linear", "depth": 1, "total": 1000,
    ...                                     "trainable": 600, "own": 1000, "shared": False}], "shared": []}
    >>> "1,000 parameters (600 trainable, 400 frozen); 0.004 MB float32" in render_params(data)
    True
    """
    dtypes = ", ".join(f"{bytes_in('MB', b)} MB {d}" for d, b in data.get("bytes_by_dtype", {}).items())
    lines = [f"{data['total']:,} parameters ({data['trainable']:,} trainable, {data['frozen']:,} frozen); "
             f"{dtypes or 'no bytes'}; {data.get('buffers', 0):,} buffer elements."]
    rows = _shown(data.get("modules") or [], depth)
    if rows:
        names = display_names([r["name"] for r in rows], [r["depth"] - 1 for r in rows])
        table = [[name, r["type"], f"{r['total']:,}", f"{r['trainable']:,}", "yes" if r["shared"] else ""]
                 for name, r in zip(names, rows)]
        lines += ["", tabulate(table, headers=["module", "type", "parameters", "trainable", "shared"],
                               tablefmt="github", disable_numparse=True)]
    for shared in data.get("shared") or []:
        lines += ["", f"Shared tensor ({shared['numel']:,} elements, counted once): {', '.join(shared['names'])}."]
    return "\n".join(lines) + "\n"


def render_counts(summary: CountsSummary) -> str:
    """The report of a count command: a heading naming the target and its input, then its tables."""
    head = f"# sbprof {summary.command}: {summary.target}" + (f" ({summary.input})" if summary.input else "")
    m = summary.record
    if m is None:
        return f"{head}\n\nNothing counted yet.\n"
    if not m.ok:
        return f"{head}\n\n{m.status}: {m.message}\n"
    if summary.command == "params":
        body = render_params(summary.result, summary.depth)
    elif summary.command == "flops":
        body = render_flops(summary.result, summary.depth)
    else:
        body = render_breakdown(summary.result, summary.steps)
    return f"{head}\n\n{body}"


def render(summary: CountsSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md``: file name -> content."""
    return {REPORT_FILE: render_counts(summary)}
