"""A transducer benchmark's results analysed once: per batching mode and setting, the backends ranked.

A backend is *ranked* only when it was measured and agreed with the
reference; the others follow with the reason. A cell measured in several
runs pools its runs' steps (the step-time statistics) and takes the median
of their peaks. The renderers (:mod:`sbprof.report.transducer`) format the
:class:`TransducerSummary`. Pure: no torch, no clocks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.base.errors import ConfigError
from sbprof.record import Measurement
from sbprof.record.results import Results
from sbprof.analysis.runs import group_runs, representative
from sbprof.base.stats import Stats, summarise

MB = 1e6


@dataclass(frozen=True)
class BackendRow:
    """One backend's cell: the record that speaks for it, its step times (pooled over runs), its peak."""

    record: Measurement
    runs: int
    ranked: bool
    steps: Optional[Stats]
    peak_mb: Optional[float]

    @property
    def mode(self) -> str:
        """``fixed``, ``max_frames`` or ``search``."""
        return mode_of(self.record)


@dataclass(frozen=True)
class ModeTable:
    """The backends of one batching mode, size and setting: ranked ones by mean step time, then the others."""

    mode: str
    size: Optional[int]
    device: str
    threads: int
    rows: List[BackendRow]
    padding: Optional[Dict[str, Any]]


@dataclass(frozen=True)
class TransducerSummary:
    """Everything a transducer benchmark's reports show (see the module docstring)."""

    rules: Dict[str, Any]
    loads: Optional[Tuple[float, float, List[str]]]
    tables: List[ModeTable]
    searches: List[Measurement]
    rows: List[BackendRow]


def mode_of(m: Measurement) -> str:
    return str(m.cell.params.get("mode", ""))


def _peak_mb(m: Measurement) -> Optional[float]:
    if m.memory is None:
        return None
    added = m.memory.peak_cuda_delta_bytes if m.cell.device.startswith("cuda") else m.memory.peak_rss_delta_bytes
    return None if added is None else added / MB


def _row(runs: Sequence[Measurement]) -> BackendRow:
    ok = [m for m in runs if m.ok and m.wall_s]
    rep = representative(runs)
    peaks = [p for p in (_peak_mb(m) for m in ok) if p is not None]
    agreement = rep.extra.get("agreement") or {}
    return BackendRow(record=rep, runs=len(ok), ranked=bool(ok) and bool(agreement.get("ok")),
                      steps=summarise([s for m in ok for s in m.wall_s]) if ok else None,
                      peak_mb=statistics.median(peaks) if peaks else None)


def analyse(results: Results) -> TransducerSummary:
    """The one analysis of a transducer benchmark's results (see the module docstring).

    A measured backend record without step times (a hand-edited file) is refused, naming it.
    """
    for m in results.records:
        if m.ok and not m.wall_s and mode_of(m) != "search":
            raise ConfigError(f"record {m.label!r}: measured (status ok) but its field 'wall_s' holds no step times")
    rows = [_row(runs) for runs in group_runs(results.records).values()]
    tables: Dict[Tuple[str, Optional[int], str, int], List[BackendRow]] = {}
    for row in rows:
        m = row.record
        if mode_of(m) == "search":
            continue
        size = m.cell.batch_size if mode_of(m) == "fixed" else m.cell.params.get("max_frames")
        tables.setdefault((mode_of(m), size, m.cell.device, m.cell.threads), []).append(row)
    timed = [m for m in results.records if m.extra.get("loadavg_1m") is not None]
    loads = None
    if timed:
        values = [m.extra["loadavg_1m"] for m in timed]
        # The load counts the measuring worker's own threads: only beyond them did others compete.
        busy = list(dict.fromkeys(m.label for m in timed if m.extra["loadavg_1m"] > m.cell.threads))
        loads = (min(values), max(values), busy)
    return TransducerSummary(
        rules=dict(results.rules), loads=loads,
        tables=[ModeTable(mode, size, device, threads,
                          sorted((r for r in group if r.ranked), key=lambda r: r.steps.mean)
                          + [r for r in group if not r.ranked],
                          next((r.record.extra["padding"] for r in group if r.record.extra.get("padding")), None))
                for (mode, size, device, threads), group in tables.items()],
        searches=[r.record for r in rows if mode_of(r.record) == "search"], rows=rows)
