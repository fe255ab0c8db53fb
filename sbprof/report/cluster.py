"""The report of a job measured on several machine types: each type's nodes and noise floor, the cost of 1,000 hours
of audio per cell and type, the cheapest real-time choice, and the types side by side (formats a summary).

Every figure comes from one machine type's records (:mod:`sbprof.analysis.cluster`); each type's own report, the
job's usual one, is in its folder (``machines/<type>/``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from sbprof.analysis.cluster import HOURS, ClusterSummary, Cost, CostRow, NodeOffset, TypeNodes
from sbprof.base.stats import METRICS
from sbprof.report.format import plural, sig3, table
from sbprof.report.machines import render_merged

REPORT_FILE = "report.md"


def cell_text(cell: Any) -> str:
    """A cell (the analysis's :class:`~sbprof.record.cell.Cell`) without its run: ``m (v), cpu 2 threads, 2 s x 4,
    chunk_size=8``.

    Example
    -------
    >>> from sbprof.record.cell import Cell
    >>> cell_text(Cell(model="m", device="cpu", threads=2, audio_s=2.0, batch_size=4))
    'm, cpu 2 threads, 2 s x 4'
    """
    parts = [cell.model + (f" ({cell.variant})" if cell.variant else ""),
             f"{cell.device} {plural(cell.threads, 'thread')}"]
    if cell.audio_s is not None:
        parts.append(f"{cell.audio_s:g} s" + (f" x {cell.batch_size}" if cell.batch_size is not None else ""))
    elif cell.batch_size is not None:
        parts.append(f"batch {cell.batch_size}")
    parts += [f"{k}={v}" for k, v in sorted(cell.params.items())]
    return ", ".join(parts)


def cost_text(cost: Optional[Cost], currency: str) -> str:
    """``12.3 EUR [11.9, 12.8]``; ``no price`` when the type has none.

    Example
    -------
    >>> cost_text(Cost(12.34, 11.9, 12.8), "EUR"), cost_text(None, "EUR")
    ('12.3 EUR [11.9, 12.8]', 'no price')
    """
    if cost is None:
        return "no price"
    return f"{sig3(cost.median)} {currency} [{sig3(cost.low)}, {sig3(cost.high)}]"


def _rtf_text(row: CostRow) -> str:
    if row.capacity is not None:
        return f"capacity {row.capacity:g} streams"
    if row.rtf is None:
        return "n/a"
    return f"{sig3(row.rtf.median)} [{sig3(row.rtf.low)}, {sig3(row.rtf.high)}]"


def _offset_text(node: NodeOffset) -> str:
    if node.relative is None:
        return "n/a (no cell with runs on another node)"
    return f"{100 * node.relative:+.1f} %" + (" **outlier**" if node.outlier else "")


def _nodes_sections(nodes: List[TypeNodes]) -> List[str]:
    rows, per_node = [], []
    for t in nodes:
        floor = f"{100 * t.floor:.1f} %" if t.floor is not None else "n/a (fewer than two nodes to compare)"
        outliers = ", ".join(f"{n.node} ({100 * n.relative:+.1f} %)" for n in t.nodes if n.outlier) or "none"
        rows.append([t.machine, str(len(t.nodes)), "; ".join(t.hardware) or "?", floor, outliers])
        per_node += [[t.machine, n.node, str(n.records), _offset_text(n)] for n in t.nodes]
    return ["", "## Machine types and their nodes", "",
            "Between-node floor: each run's median call divided by its cell's median over all runs (logarithms); "
            "a node's offset is the median of its runs', the floor the standard deviation of the nodes' offsets "
            "(~ a coefficient of variation), outlying nodes left out. A node is named an outlier when its offset is "
            "more than 10 % from the nodes' median offset and more than 3 times the spread of runs within one node "
            "(from three nodes on). Differences between machine types smaller than a type's floor are not told "
            "apart from which node ran them.", "",
            table(rows, ["machine type", "nodes", "hardware (as its records say)", "between-node floor",
                         "outlying nodes"]),
            "", table(per_node, ["machine type", "node", "records", "offset from its cells' medians"])]


def _cost_sections(summary: ClusterSummary) -> List[str]:
    cur = summary.currency or "(no price given)"
    if not summary.costs:
        return ["", f"## Cost of {HOURS:,.0f} hours of audio", "",
                "No record of this job gives a processing time per second of audio (or a stream's capacity): no "
                "cost per hour of audio here."]
    rows = [[cell_text(r.cell), r.machine, str(r.runs), _rtf_text(r), "yes" if r.realtime else "no",
             cost_text(r.cost, cur), cost_text(r.cpu_cost, cur) if r.cpu_cost else "n/a"] for r in summary.costs]
    sources = sorted({f"{r.machine}: {r.core_price}" for r in summary.costs if r.core_price})
    lines = ["", f"## Cost of {HOURS:,.0f} hours of audio ({cur})", "",
             f"RTF = {METRICS['rtf'].definition}; median over runs [its interval over runs]. A node-hour processes "
             f"1 / RTF hours of audio, so {HOURS:,.0f} hours cost RTF x price per hour x {HOURS:,.0f} (interval "
             f"from the RTF's). From the CPU cost: core-seconds per audio second x price per core-hour x "
             f"{HOURS:,.0f}" + (f" ({'; '.join(sources)})" if sources else "") + ". A stream job: price per hour x "
             f"{HOURS:,.0f} / its capacity (streams one node serves within the delay target), the interval from "
             "the runs' capacities. Real-time: the RTF's interval stays below 1 (a stream: a capacity was found).",
             "", table(rows, ["cell", "machine type", "runs", "RTF [interval]", "real-time",
                              "cost per 1,000 h (node price)", "cost per 1,000 h (CPU cost)"])]
    lines += ["", "## Cheapest", ""]
    if not summary.cheapest:
        lines.append("No priced machine type kept a cell real-time (give each type its price_per_hour).")
    for model, r in sorted(summary.cheapest.items()):
        close = summary.rivals.get(model, [])
        told = (f" Not told apart (their cost intervals overlap) from {len(close)} other choice(s), e.g. "
                + "; ".join(f"{o.machine}, {cell_text(o.cell)}: {cost_text(o.cost, cur)}" for o in close[:3]) + "."
                if close else " No other real-time choice's cost interval reaches it.")
        lines.append(f"- **{model}**: machine type **{r.machine}**, {cell_text(r.cell)}: "
                     f"{cost_text(r.cost, cur)} per {HOURS:,.0f} h of audio, RTF {_rtf_text(r)}.{told}")
    return lines


def render_cluster(summary: ClusterSummary) -> str:
    """Markdown of a job measured on several machine types."""
    names = ", ".join(f"[{m}](machines/{m}/report.md)" for m in summary.machines)
    lines = [f"# sbprof {summary.job} on {plural(len(summary.machines), 'machine type')}", "",
             f"Each machine type's own report: {names}. Nothing here pools records of two types."]
    lines += _nodes_sections(summary.nodes) + _cost_sections(summary)
    if summary.merged is not None:
        merged = render_merged(summary.merged, title="Machine types side by side").splitlines()
        lines += [""] + ["#" + line if line.startswith("#") else line for line in merged]
    return "\n".join(lines) + "\n"


def render(summary: ClusterSummary) -> Dict[str, str]:
    """``report.md`` of the cluster run's folder: file name -> content."""
    return {REPORT_FILE: render_cluster(summary)}
