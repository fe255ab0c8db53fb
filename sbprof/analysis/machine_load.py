"""The load other processes put on the machine while a sweep's cells were timed, and when a setting is crowded.

A worker reads the kernel's CPU counters around every cell: the CPU time
other processes took over the cell's wall time is how many cores they kept
busy (``others_cpu_s`` / ``window_s`` in the record's ``extra``). A setting
whose threads, with that load counted, outnumber the logical cores is
*oversubscribed*: its worker waited for a core, so its times are upper
bounds. Pure: no torch, no clocks.

Example
-------
>>> oversubscribed("cpu", 1, 2, OthersLoad(mean=1.5, max_cell=1.7, cells_over=4, cells=4))
True
>>> oversubscribed("cpu", 1, 2, OthersLoad(mean=0.5, max_cell=0.7, cells_over=0, cells=4))
False
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from sbprof.analysis.cell_payload import cell_payload
from sbprof.analysis.runs import group_runs
from sbprof.record import Measurement

OVERSUBSCRIBED_SLACK = 0.1
"""Cores of other processes' load tolerated beyond the machine's before a setting is flagged (the kernel's own
housekeeping, the runner waiting on its pipe)."""


@dataclass(frozen=True)
class OthersLoad:
    """The cores other processes kept busy while a setting's cells were timed.

    ``mean``: their CPU time over all the cells' windows (summed before
    dividing: one window is a few ticks); ``max_cell``: the highest of one cell
    (summed over its runs); ``cells_over``: cells for which the worker's
    threads plus the others' cores exceeded the machine's cores.
    """

    mean: float
    max_cell: float
    cells_over: int
    cells: int


def others_of(groups: Sequence[Sequence[Measurement]], threads: int, cores: Optional[int]) -> Optional[OthersLoad]:
    """The others' load over a setting's cells (each a list of runs); ``None`` when no run read it."""
    per_cell = []
    for runs in groups:
        timed = [p for p in (cell_payload(m) for m in runs if m.ok) if p.window_s]
        if timed:
            per_cell.append((sum(p.others_cpu_s or 0.0 for p in timed), sum(p.window_s for p in timed)))
    if not per_cell:
        return None
    shares = [cpu / wall for cpu, wall in per_cell]
    over = sum(1 for x in shares if cores and threads + x > cores + OVERSUBSCRIBED_SLACK)
    return OthersLoad(mean=sum(c for c, _ in per_cell) / sum(w for _, w in per_cell), max_cell=max(shares),
                      cells_over=over, cells=len(per_cell))


def oversubscribed(device: str, threads: int, cores: Optional[int], others: Optional[OthersLoad]) -> bool:
    """More runnable threads than cores: the worker's own, or with the others' load counted (never on CUDA, whose
    work waits for the GPU, not for a core)."""
    if not cores or device.startswith("cuda"):
        return False
    return threads > cores or (others is not None and threads + others.mean > cores + OVERSUBSCRIBED_SLACK)


def crowded_settings(records: Sequence[Measurement]) -> Set[Tuple[str, int]]:
    """The (device, threads) settings of these records that are oversubscribed: their times are upper bounds."""
    by_setting: Dict[Tuple[str, int], List[Measurement]] = {}
    for m in records:
        by_setting.setdefault(m.cell.setting, []).append(m)
    out = set()
    for (device, threads), group in by_setting.items():
        cores = next((m.env.cpu_count for m in group if m.env is not None), None)
        if oversubscribed(device, threads, cores, others_of(list(group_runs(group).values()), threads, cores)):
            out.add((device, threads))
    return out
