"""A job measured on several machine types of a cluster: each type apart, its nodes' spread, and what an hour costs.

Nothing is pooled across machine types: each type's figures come from its
own records (its own ``results.json``). Within a type, the nodes are pooled
across runs (a cell's runs land on whichever node is free), and:

- **the between-node noise floor**: each run's figure (its median call)
  divided by its cell's median over all runs, on a log scale; a node's
  offset is the median of its runs' ratios, and the type's floor is the
  standard deviation of its nodes' offsets (~ a coefficient of variation),
  outlying nodes left out;
- **an outlying node** (thermal throttling, a noisy neighbour) is one whose
  offset is more than :data:`NODE_OUTLIER_REL` away from the median of the
  nodes' offsets, and more than :data:`NODE_OUTLIER_SPREADS` times the
  spread of runs within one node (scaled MAD): it is named (from three
  nodes on; two nodes apart cannot tell which one is off).

**Cost of 1,000 hours of audio** (in the currency the user names), per cell
and machine type: a node-hour processes ``1 / RTF`` hours of audio, so 1,000
hours of audio cost ``RTF x price_per_hour x 1000``, with the RTF's interval
over runs (:func:`~sbprof.analysis.runs.rtf_over_runs`). On the CPU also from
the CPU cost: ``core-seconds per audio second x price per core-hour x 1000``
(the type's ``price_per_core_hour``, else its ``price_per_hour`` divided by
the node's logical cores). A stream job's node serves its capacity (real-time
streams within the delay target) at once: ``price_per_hour x 1000 /
capacity``, its interval from the runs' capacities. **Cheapest**, per model:
the (machine type, setting, cell) of lowest cost whose RTF interval stays
below 1 (real-time), or whose capacity search found a stream count within
the delay target; the real-time choices whose cost interval overlaps its
are named beside it (not told apart from it).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.intervals import RunInterval
from sbprof.analysis.machines import MachinesSummary, analyse_machines
from sbprof.analysis.runs import cpu_cost_over_runs, group_runs, rtf_over_runs, run_figure
from sbprof.record import Cell, Measurement
from sbprof.record.codec import from_json
from sbprof.record.payload import Payload
from sbprof.record.results import Machine, Results

HOURS = 1000.0
"""Hours of audio the cost is given for."""
NODE_OUTLIER_REL = 0.10
"""A node this far (relative) from the nodes' median offset may be an outlier..."""
NODE_OUTLIER_SPREADS = 3.0
"""...when its distance is also beyond this many times the spread of runs within one node."""


@dataclass(frozen=True)
class Price:
    """One machine type's prices (``None``: not given)."""

    per_hour: Optional[float] = None
    per_core_hour: Optional[float] = None


@dataclass(frozen=True)
class NodeOffset:
    """One node of a type: its records, and how far its runs sit from their cells' medians (``exp(offset) - 1``;
    ``None`` when none of its cells has runs on other nodes to compare with)."""

    node: str
    records: int
    offset: Optional[float] = None
    outlier: bool = False

    @property
    def relative(self) -> Optional[float]:
        return None if self.offset is None else math.exp(self.offset) - 1


@dataclass(frozen=True)
class TypeNodes:
    """The nodes of one machine type, its between-node floor (``None`` with fewer than two nodes) and what the
    nodes were (CPU, cores, GPU, as their records say)."""

    machine: str
    nodes: List[NodeOffset]
    floor: Optional[float]
    hardware: List[str] = field(default_factory=list)

    @property
    def outliers(self) -> List[str]:
        return [n.node for n in self.nodes if n.outlier]


@dataclass(frozen=True)
class Cost:
    """A cost of 1,000 hours of audio: median and interval."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, interval: RunInterval, factor: float) -> "Cost":
        return cls(interval.median * factor, interval.low * factor, interval.high * factor)


@dataclass(frozen=True)
class CostRow:
    """One cell on one machine type: its RTF over runs (or a stream's capacity), whether it is real-time, and its
    cost of 1,000 hours of audio from the node-hour price and, on the CPU, from the CPU cost."""

    machine: str
    cell: Cell
    runs: int
    rtf: Optional[RunInterval] = None
    capacity: Optional[float] = None
    realtime: bool = False
    cost: Optional[Cost] = None
    cpu_cost: Optional[Cost] = None
    core_price: str = ""  # where the core-hour price came from


@dataclass(frozen=True)
class ClusterSummary:
    """Everything the cluster report shows (see the module docstring)."""

    job: str
    currency: str
    machines: List[str]
    nodes: List[TypeNodes]
    costs: List[CostRow]
    cheapest: Dict[str, CostRow]
    rivals: Dict[str, List[CostRow]] = field(default_factory=dict)  # real-time rows whose cost interval overlaps
    merged: Optional[MachinesSummary] = None
    prices: Dict[str, Price] = field(default_factory=dict)


def node_of(m: Measurement) -> Optional[str]:
    """The node a record was measured on (its ``extra.cluster.node``), ``None`` when not measured on a cluster."""
    stamp = from_json(Payload, m.extra, f"record {m.label!r}: extra").cluster
    return stamp.get("node") if stamp and stamp.get("node") else None


def type_nodes(machine: str, records: Sequence[Measurement]) -> TypeNodes:
    """The between-node floor and the outlying nodes of one machine type (see the module docstring).

    Example
    -------
    >>> def rec(cell, run, node, t):
    ...     return Measurement(label="c", cell=Cell(model=cell, run=run), wall_s=[t], extra={"cluster": {"node": node}})
    >>> recs = [rec(c, r, n, base * f) for c, base in (("a", 1.0), ("b", 2.0)) for r, (n, f) in
    ...         enumerate([("n1", 1.0), ("n2", 1.0), ("n3", 1.5), ("n1", 1.01), ("n2", 0.99), ("n3", 1.52)])]
    >>> nodes = type_nodes("cpu", recs)
    >>> nodes.outliers, round(nodes.floor, 3)
    (['n3'], 0.007)
    """
    ratios: Dict[str, List[float]] = {}
    seen: Dict[str, int] = {}
    for m in records:
        if node_of(m):
            seen[node_of(m)] = seen.get(node_of(m), 0) + 1
    for runs in group_runs([m for m in records if m.ok and m.wall_s and node_of(m)]).values():
        if len(runs) < 2:
            continue
        centre = statistics.median(math.log(run_figure(m)) for m in runs)
        for m in runs:
            ratios.setdefault(node_of(m), []).append(math.log(run_figure(m)) - centre)
    offsets = {node: statistics.median(r) for node, r in ratios.items()}
    within = [x - offsets[node] for node, r in ratios.items() for x in r]
    spread = 1.4826 * statistics.median(abs(x) for x in within) if within else 0.0  # scaled MAD within nodes
    centre = statistics.median(offsets.values()) if offsets else 0.0
    nodes = []
    for node in sorted(seen):
        far = abs(offsets[node] - centre) if node in offsets else 0.0
        # Two nodes apart cannot tell which one is off: from three on, the odd one out is named.
        outlier = len(offsets) >= 3 and far > math.log1p(NODE_OUTLIER_REL) and far > NODE_OUTLIER_SPREADS * spread
        nodes.append(NodeOffset(node, seen[node], offsets.get(node), outlier))
    kept = [n.offset for n in nodes if n.offset is not None and not n.outlier]
    hardware = sorted({_hardware(m) for m in records if m.env is not None and m.ok})
    return TypeNodes(machine, nodes, statistics.stdev(kept) if len(kept) >= 2 else None, hardware)


def _hardware(m: Measurement) -> str:
    gpu = f", {m.env.gpu}" if m.env.gpu else ""
    return f"{m.env.cpu or '?'} ({m.env.cpu_count or '?'} logical cores){gpu}"


def _cores(records: Sequence[Measurement]) -> Optional[float]:
    counts = [m.env.cpu_count for m in records if m.env is not None and m.env.cpu_count]
    return statistics.median(counts) if counts else None


def cost_rows(machine: str, results: Results, price: Price) -> List[CostRow]:
    """The cost of 1,000 hours of audio of each cell measured on one machine type (see the module docstring).

    Example
    -------
    >>> recs = [Measurement(label="c", cell=Cell(model="m", run=r), wall_s=[w], cpu_s=[w], audio_seconds=2.0)
    ...         for r, w in enumerate([0.5, 0.5, 0.5])]
    >>> row = cost_rows("cpu8", Results("profile", records=recs), Price(per_hour=2.0, per_core_hour=0.25))[0]
    >>> row.rtf.median, row.cost.median, row.cpu_cost.median, row.realtime
    (0.25, 500.0, 62.5, True)
    """
    if results.job == "stream":
        return _stream_rows(machine, results, price)
    cores = _cores(results.records)
    core_price, source = price.per_core_hour, "its price per core-hour"
    if core_price is None and price.per_hour is not None and cores:
        core_price, source = price.per_hour / cores, f"its price per hour / {cores:g} logical cores"
    rows = []
    for runs in group_runs(results.records).values():
        ok = [m for m in runs if m.ok and m.wall_s and m.audio_seconds and m.cell.rank is None]
        if not ok:
            continue
        rtf = rtf_over_runs(ok).interval
        cpu = cpu_cost_over_runs(ok)
        rows.append(CostRow(
            machine=machine, cell=replace(ok[0].cell, run=0), runs=len(ok), rtf=rtf, realtime=rtf.high < 1.0,
            cost=Cost.of(rtf, price.per_hour * HOURS) if price.per_hour is not None else None,
            cpu_cost=Cost.of(cpu.interval, core_price * HOURS) if cpu is not None and core_price is not None else None,
            core_price=source if cpu is not None and core_price is not None else ""))
    return rows


def _stream_rows(machine: str, results: Results, price: Price) -> List[CostRow]:
    from sbprof.analysis.stream import analyse

    rows = []
    for setting in analyse(results).settings:
        for row in setting.capacities:
            found = [f for f in row.found if f] or ([row.capacity] if row.capacity else [])
            cost = None
            if row.capacity and price.per_hour is not None:
                factor = price.per_hour * HOURS
                cost = Cost(factor / row.capacity, factor / max(found), factor / min(found))
            rows.append(CostRow(machine=machine, cell=replace(row.cell, run=0), runs=row.runs,
                                capacity=row.capacity, realtime=bool(row.capacity), cost=cost))
    return rows


def cheapest(rows: Sequence[CostRow]) -> Dict[str, CostRow]:
    """Per model (and variant), the real-time row of lowest cost (priced rows only).

    Example
    -------
    >>> iv = RunInterval(0.5, 0.4, 0.6, 0.95, 0.4, 0.6, 0.9, 3)
    >>> rows = [CostRow("a", Cell(model="m"), 3, iv, realtime=True, cost=Cost(5.0, 4.0, 6.0)),
    ...         CostRow("b", Cell(model="m"), 3, iv, realtime=True, cost=Cost(3.0, 2.0, 4.0)),
    ...         CostRow("c", Cell(model="m"), 3, iv, realtime=False, cost=Cost(1.0, 0.5, 1.5))]
    >>> cheapest(rows)["m"].machine
    'b'
    """
    best: Dict[str, CostRow] = {}
    for row in rows:
        model = row.cell.model + (f" ({row.cell.variant})" if row.cell.variant else "")
        if row.realtime and row.cost is not None and (model not in best or row.cost.median < best[model].cost.median):
            best[model] = row
    return best


def rivals(rows: Sequence[CostRow], best: CostRow) -> List[CostRow]:
    """The other real-time, priced rows of ``best``'s model whose cost interval overlaps its: the cheapest is not
    told apart from them (cheapest first)."""
    same = [r for r in rows if r is not best and r.realtime and r.cost is not None and r.cell.model == best.cell.model
            and r.cell.variant == best.cell.variant and r.cost.low <= best.cost.high]
    return sorted(same, key=lambda r: r.cost.median)


def analyse_cluster(job: str, types: Sequence[Tuple[str, str, Results]], prices: Dict[str, Price],
                    currency: str) -> ClusterSummary:
    """The one analysis of a job measured on several machine types: ``types`` holds each type's name, results
    folder and results (see the module docstring)."""
    costs = [row for name, _, results in types for row in cost_rows(name, results, prices.get(name, Price()))]
    order = {name: i for i, (name, _, _) in enumerate(types)}
    costs.sort(key=lambda r: (str(r.cell.key()), order[r.machine]))  # one cell's types next to each other
    merged = None
    if job in ("profile", "compare-models") and len(types) > 1:  # the jobs whose machines analyse_machines sets side by side
        merged = analyse_machines([Machine(name, Path(source), results)
                                   for name, source, results in types])
    best = cheapest(costs)
    return ClusterSummary(job=job, currency=currency, machines=[name for name, _, _ in types],
                          nodes=[type_nodes(name, results.records) for name, _, results in types], costs=costs,
                          cheapest=best, rivals={model: rivals(costs, row) for model, row in best.items()},
                          merged=merged, prices=dict(prices))


def prices_of(spec: Dict[str, Any]) -> Dict[str, Price]:
    """The prices of each machine type of an ``executor`` as saved (its JSON form)."""
    return {m["name"]: Price(m.get("price_per_hour"), m.get("price_per_core_hour")) for m in spec.get("machines", [])}
