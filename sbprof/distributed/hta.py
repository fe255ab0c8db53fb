"""HolisticTraceAnalysis (HTA) on a run's per-rank GPU traces: temporal breakdown and comm/compute overlap.

HTA (``pip install 'sbprof[hta]'``, imported only here and only when used)
reads a folder of per-rank torch.profiler traces. Its figures are built on
GPU kernels: on CPU-only (gloo) traces its temporal breakdown fails, so the
merge calls it only for NCCL runs (:func:`sbprof.distributed.merge.merge_run`)
and reads communication from the profiler's events itself otherwise.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Union


def _rows(frame: Any) -> List[Dict[str, Any]]:
    """A pandas DataFrame as JSON-ready rows (numbers as floats, the rest as text)."""
    rows = []
    for row in frame.to_dict("records"):
        rows.append({str(k): (float(v) if isinstance(v, (int, float)) else str(v)) for k, v in row.items()})
    return rows


def gpu_breakdown(trace_dir: Union[str, Path]) -> Dict[str, List[Dict[str, Any]]]:
    """HTA's per-rank temporal breakdown (idle, compute, non-compute time) and comm/compute overlap.

    Raises
    ------
    ImportError
        HTA is not installed.
    """
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(trace_dir))
    return {"temporal_breakdown": _rows(analysis.get_temporal_breakdown(visualize=False)),
            "comm_comp_overlap": _rows(analysis.get_comm_comp_overlap(visualize=False))}
