"""Results of several machines analysed once, side by side: nothing pooled across machines.

Each machine's figures come from its own records only. For comparisons,
each machine's series per setting (:mod:`sbprof.analysis.series`); for
sweeps, per model and grid cell, the RTF over runs of each (machine,
setting); on the CPU, each point's or cell's CPU cost over runs beside
it (core-seconds per audio second: machines compared on the work they do,
whatever their load). The renderers (:mod:`sbprof.report.machines`) format
the :class:`MachinesSummary`. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.compare_models import cpu_costs
from sbprof.analysis.intervals import RunsSummary
from sbprof.analysis.runs import cpu_cost_over_runs
from sbprof.analysis.series import Series, build_series, settings_of
from sbprof.analysis.machine_facts import MachineFacts, results_facts
from sbprof.analysis.figures import Outcome, rtf_stats, setting_sort_key
from sbprof.record import Measurement
from sbprof.record.results import Machine
from sbprof.base.stats import Stats, summarise

GridKey = Tuple[float, int]


@dataclass(frozen=True)
class MachineSeries:
    """A comparison's series on one machine and setting (a column or a line of the merged report)."""

    label: str
    device: str
    threads: int
    series: List[Series]
    cpu_costs: Dict[Tuple[str, float], RunsSummary] = field(default_factory=dict)  # (variant, x); none on CUDA


@dataclass(frozen=True)
class GridRtf:
    """A sweep cell on one machine and setting: the median over runs of each run's median RTF and the pooled
    quartiles of every batch; or, when no run succeeded, the status of its first record."""

    median: Optional[float]
    pooled: Optional[Stats]
    failed: Optional[Outcome]
    cpu_cost: Optional[RunsSummary] = None  # over runs; none on CUDA


@dataclass(frozen=True)
class MachineRow:
    """One merged machine: its label, where it was measured and the results it came from."""

    label: str
    environment: MachineFacts
    source: str


@dataclass(frozen=True)
class SweepColumns:
    """One model of merged sweeps: columns (machine label, device, threads), rows grid cells."""

    model: str
    columns: List[Tuple[str, str, int]]
    rows: Dict[GridKey, List[Optional[GridRtf]]]


@dataclass(frozen=True)
class MachinesSummary:
    """Everything a merged report shows (see the module docstring)."""

    job: str
    machines: List[MachineRow]
    vary: str
    compare: List[MachineSeries]
    sweeps: List[SweepColumns]


def _grid_rtf(records: Sequence[Measurement]) -> GridRtf:
    ok = [m for m in records if m.ok and m.wall_s and m.audio_seconds]
    if not ok:
        return GridRtf(None, None, Outcome.of(records[0]))
    return GridRtf(statistics.median(rtf_stats(m).median for m in ok),
                   summarise([s / m.audio_seconds for m in ok for s in m.wall_s]), None, cpu_cost_over_runs(ok))


def _sweeps(machines: Sequence[Machine]) -> List[SweepColumns]:
    out = []
    for model in sorted({m.cell.model for mr in machines for m in mr.results.records}):
        columns = sorted({(i, m.cell.setting) for i, mr in enumerate(machines) for m in mr.results.records
                          if m.cell.model == model}, key=lambda c: (c[0],) + setting_sort_key(*c[1]))
        grid = sorted({m.cell.grid_key for mr in machines for m in mr.results.records if m.cell.model == model})
        rows: Dict[GridKey, List[Optional[GridRtf]]] = {}
        for key in grid:
            rows[key] = []
            for i, setting in columns:
                found = [m for m in machines[i].results.records if m.cell.model == model
                         and m.cell.setting == setting and m.cell.grid_key == key]
                rows[key].append(_grid_rtf(found) if found else None)
        out.append(SweepColumns(model, [(machines[i].label, d, t) for i, (d, t) in columns], rows))
    return out


def analyse_machines(machines: Sequence[Machine]) -> MachinesSummary:
    """The one analysis of several machines' results of one job (see the module docstring)."""
    job = machines[0].results.job
    compare: List[MachineSeries] = []
    if job == "compare-models":
        for m in machines:
            for device, threads in settings_of(m.results):
                compare.append(MachineSeries(m.label, device, threads, build_series(m.results, (device, threads)),
                                             cpu_costs(m.results, (device, threads))))
    rows = [MachineRow(m.label, results_facts(m.results), str(m.source)) for m in machines]
    return MachinesSummary(job=job, machines=rows, vary=machines[0].results.rules.get("vary", "audio_s"),
                           compare=compare, sweeps=_sweeps(machines) if job == "profile" else [])

