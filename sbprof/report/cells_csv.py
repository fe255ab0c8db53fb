"""CSV of measured cells (a sweep's, a comparison's): one row per record with every number, for spreadsheets."""
from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, Sequence, Tuple

from sbprof.analysis.sweep import SweepModel
from sbprof.record import Measurement

COLUMNS = (
    "model", "variant", "interface", "input", "device", "threads", "audio_s", "batch_size", "run", "batch_audio_s",
    "status", "message", "warmup_batches", "measured_batches",
    "rtf_median", "rtf_q1", "rtf_q3", "rtf_iqr", "rtf_min", "rtf_max", "rtfx",
    "rtf_cpu_median", "rtf_cuda_median", "host_busy_rtf", "gpu_busy_rtf", "wall_s_median",
    "peak_memory_gb", "batch_memory_gb", "peak_rss_bytes", "peak_rss_delta_bytes", "rss_method", "heap_trim",
    "peak_cuda_bytes", "peak_cuda_delta_bytes", "cuda_initialized", "loadavg_1m", "trace",
)
"""Columns in order; RTF columns are unitless, ``*_s`` seconds, ``*_bytes`` bytes, GB = 10^9 bytes."""


def csv_row(m: Measurement, figures: Dict[str, Any]) -> Dict[str, Any]:
    """One record (a cell's run) as a CSV row, from its derived figures (empty where a figure does not apply)."""
    f = figures if m.audio_seconds is not None else {}
    c = m.cell
    rtf = f.get("rtf") or {}
    busy = f.get("busy_rtf") or {}
    memory = m.memory.to_dict() if m.memory is not None else {}
    row: Dict[str, Any] = {
        "model": c.model, "variant": c.variant, "interface": m.settings.get("interface"), "input": c.input,
        "device": c.device, "threads": c.threads, "audio_s": c.audio_s, "batch_size": c.batch_size, "run": c.run,
        "batch_audio_s": m.audio_seconds, "status": m.status, "message": m.message,
        "warmup_batches": m.warmup, "measured_batches": len(m.wall_s) if m.ok else None,
        "rtf_median": rtf.get("median"), "rtf_q1": rtf.get("q1"), "rtf_q3": rtf.get("q3"),
        "rtf_iqr": rtf.get("iqr"), "rtf_min": rtf.get("min"), "rtf_max": rtf.get("max"),
        "rtfx": f.get("rtfx"),
        "rtf_cpu_median": (f.get("rtf_cpu") or {}).get("median"),
        "rtf_cuda_median": (f.get("rtf_cuda") or {}).get("median"),
        "host_busy_rtf": busy.get("host_busy_rtf"), "gpu_busy_rtf": busy.get("gpu_busy_rtf"),
        "wall_s_median": f.get("wall_s_median"),
        "peak_memory_gb": f.get("peak_memory_gb"), "batch_memory_gb": f.get("batch_memory_gb"),
        "cuda_initialized": m.extra.get("cuda_initialized"), "loadavg_1m": m.extra.get("loadavg_1m"),
        "trace": m.extra.get("trace"),
    }
    for key in ("peak_rss_bytes", "peak_rss_delta_bytes", "rss_method", "heap_trim", "peak_cuda_bytes",
                "peak_cuda_delta_bytes"):
        row[key] = memory.get(key)
    return {k: ("" if v is None else v) for k, v in row.items()}


def predicted_rows(model: SweepModel) -> List[Dict[str, Any]]:
    """One row per predicted cell of a model (status ``predicted``); its 95 % intervals in the message, or, for a
    figure beyond the measured range, an empty value and its lower bound."""
    rows: Dict[tuple, Dict[str, Any]] = {}
    for p in model.predicted:
        row = rows.setdefault((p.device, p.threads, p.audio_s, p.batch_size), {
            "model": model.model, "variant": model.variant, "device": p.device, "threads": p.threads,
            "audio_s": p.audio_s, "batch_size": p.batch_size, "batch_audio_s": p.audio_s * p.batch_size,
            "status": "predicted", "message": f"predicted ({p.why}); 95 % intervals:"})
        name, scale = (("rtf", p.audio_s * p.batch_size) if p.figure == "time_s" else
                       ("batch_memory_gb" if p.figure == "batch_memory_bytes" else "peak_memory_gb", 1e9))
        if p.beyond is not None:
            bound = f">= {p.low / scale:.4g}" if p.low is not None else "unbounded"
            row["message"] += f" {name} beyond the measured range, {bound} ({p.beyond});"
            continue
        row["message"] += f" {name} [{p.low / scale:.4g}, {p.high / scale:.4g}];"
        if p.figure == "time_s":
            row["rtf_median"], row["wall_s_median"] = p.value / scale, p.value
        else:
            row[name] = p.value / scale
    return [{k: ("" if row.get(k) is None else row.get(k, "")) for k in COLUMNS} for row in rows.values()]


def render_csv(records: Sequence[Tuple[Measurement, Dict[str, Any]]], models: Sequence[SweepModel] = ()) -> str:
    """Every record (one row per run, with its derived figures) then the models' predicted cells, as CSV text.

    Example
    -------
    >>> from sbprof.analysis.sweep import analyse
    >>> from sbprof.record import Cell, Results
    >>> m = Measurement(label="c", status="skipped", cell=Cell(device="cpu", threads=1, audio_s=1, batch_size=2))
    >>> render_csv(analyse(Results("profile", records=[m])).records).splitlines()[1].split(",")[6:11]
    ['1', '2', '0', '', 'skipped']
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_row(m, figures) for m, figures in records)
    for model in models:
        writer.writerows(predicted_rows(model))
    return out.getvalue()
