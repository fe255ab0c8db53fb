"""One typed row per record of a sweep or a comparison (and per predicted cell): every number its CSV lists.

:func:`record_row` reads a record's derived figures
(:func:`~sbprof.analysis.figures.cell_figures`) and its memory block;
:func:`predicted_rows` turns a model's predicted cells into rows of status
``predicted``, their figures in the CSV's units. The CSV renderer
(:mod:`sbprof.report.cells_csv`) only writes the fields. Pure: no torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from sbprof.analysis.cell_payload import cell_payload
from sbprof.analysis.predictions import CellPrediction
from sbprof.base.stats import GB
from sbprof.record import Measurement, MemoryPeak


@dataclass(frozen=True)
class PredictedInterval:
    """One predicted figure of a row, in the row's unit: its 95 % interval, or only its lower bound (``low``,
    ``None`` when unbounded) and why, ``beyond``, when the cell lies beyond the measured range."""

    name: str
    low: Optional[float]
    high: Optional[float] = None
    beyond: Optional[str] = None


@dataclass
class CellRow:
    """One CSV row: a record (a cell's run) with its figures, or a predicted cell (``status == "predicted"``,
    ``why`` and ``intervals`` set). RTF figures are unitless, ``*_s`` seconds, ``*_bytes`` bytes, GB = 10^9
    bytes; ``None`` where a figure does not apply."""

    model: Optional[str] = None
    variant: Optional[str] = None
    interface: Optional[str] = None
    input: Optional[str] = None
    device: Optional[str] = None
    threads: Optional[int] = None
    audio_s: Optional[float] = None
    batch_size: Optional[int] = None
    run: Optional[int] = None
    batch_audio_s: Optional[float] = None
    status: str = ""
    message: Optional[str] = None
    warmup_batches: Optional[int] = None
    measured_batches: Optional[int] = None
    rtf_median: Optional[float] = None
    rtf_q1: Optional[float] = None
    rtf_q3: Optional[float] = None
    rtf_iqr: Optional[float] = None
    rtf_min: Optional[float] = None
    rtf_max: Optional[float] = None
    rtfx: Optional[float] = None
    rtf_cpu_median: Optional[float] = None
    rtf_cuda_median: Optional[float] = None
    host_busy_rtf: Optional[float] = None
    gpu_busy_rtf: Optional[float] = None
    wall_s_median: Optional[float] = None
    peak_memory_gb: Optional[float] = None
    batch_memory_gb: Optional[float] = None
    memory: Optional[MemoryPeak] = None  # the record's peaks, as it holds them
    cuda_initialized: Optional[Any] = None
    loadavg_1m: Optional[float] = None
    trace: Optional[str] = None
    why: Optional[str] = None
    intervals: List[PredictedInterval] = field(default_factory=list)


def record_row(m: Measurement, figures: Dict[str, Any]) -> CellRow:
    """One record as a row, from its derived figures (none where the record holds no audio length).

    Example
    -------
    >>> from sbprof.analysis.figures import cell_figures
    >>> m = Measurement(label="c", wall_s=[0.1, 0.2, 0.3], audio_seconds=10.0)
    >>> row = record_row(m, cell_figures(m))
    >>> round(row.rtf_median, 6), row.measured_batches, row.status
    (0.02, 3, 'ok')
    """
    f = figures if m.audio_seconds is not None else {}
    c, extra = m.cell, cell_payload(m)
    rtf = f.get("rtf") or {}
    busy = f.get("busy_rtf") or {}
    return CellRow(
        model=c.model, variant=c.variant, interface=m.settings.get("interface"), input=c.input, device=c.device,
        threads=c.threads, audio_s=c.audio_s, batch_size=c.batch_size, run=c.run, batch_audio_s=m.audio_seconds,
        status=m.status, message=m.message, warmup_batches=m.warmup,
        measured_batches=len(m.wall_s) if m.ok else None,
        rtf_median=rtf.get("median"), rtf_q1=rtf.get("q1"), rtf_q3=rtf.get("q3"), rtf_iqr=rtf.get("iqr"),
        rtf_min=rtf.get("min"), rtf_max=rtf.get("max"), rtfx=f.get("rtfx"),
        rtf_cpu_median=(f.get("rtf_cpu") or {}).get("median"), rtf_cuda_median=(f.get("rtf_cuda") or {}).get("median"),
        host_busy_rtf=busy.get("host_busy_rtf"), gpu_busy_rtf=busy.get("gpu_busy_rtf"),
        wall_s_median=f.get("wall_s_median"), peak_memory_gb=f.get("peak_memory_gb"),
        batch_memory_gb=f.get("batch_memory_gb"),
        memory=m.memory, cuda_initialized=extra.cuda_initialized, loadavg_1m=extra.loadavg_1m, trace=extra.trace)


def predicted_rows(model: str, variant: Optional[str], predicted: Sequence[CellPrediction]) -> List[CellRow]:
    """One row per predicted cell of a model: RTF (time / audio seconds) and memory in GB, each with its
    interval; a figure beyond the measured range keeps no value, only its lower bound."""
    rows: Dict[tuple, CellRow] = {}
    for p in predicted:
        row = rows.setdefault((p.device, p.threads, p.audio_s, p.batch_size), CellRow(
            model=model, variant=variant, device=p.device, threads=p.threads, audio_s=p.audio_s,
            batch_size=p.batch_size, batch_audio_s=p.audio_s * p.batch_size, status="predicted", why=p.why))
        name, scale = (("rtf", p.audio_s * p.batch_size) if p.figure == "time_s" else
                       ("batch_memory_gb" if p.figure == "batch_memory_bytes" else "peak_memory_gb", GB))
        if p.beyond is not None:
            row.intervals.append(PredictedInterval(name, None if p.low is None else p.low / scale, beyond=p.beyond))
            continue
        row.intervals.append(PredictedInterval(name, p.low / scale, p.high / scale))
        if p.figure == "time_s":
            row.rtf_median, row.wall_s_median = p.value / scale, p.value
        else:
            setattr(row, name, p.value / scale)
    return list(rows.values())
