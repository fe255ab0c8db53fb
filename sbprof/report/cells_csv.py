"""CSV of measured cells (a sweep's, a comparison's): one row per record with every number, for spreadsheets.

Formats the typed rows of :mod:`sbprof.analysis.cell_rows` (figures computed
there); a predicted cell's intervals go into its message.
"""
from __future__ import annotations

import csv
import io
from typing import Sequence

from sbprof.analysis.cell_rows import CellRow

COLUMNS = (
    "model", "variant", "interface", "input", "device", "threads", "audio_s", "batch_size", "run", "batch_audio_s",
    "status", "message", "warmup_batches", "measured_batches",
    "rtf_median", "rtf_q1", "rtf_q3", "rtf_iqr", "rtf_min", "rtf_max", "rtfx",
    "rtf_cpu_median", "rtf_cuda_median", "host_busy_rtf", "gpu_busy_rtf", "wall_s_median",
    "peak_memory_gb", "batch_memory_gb", "peak_rss_bytes", "peak_rss_delta_bytes", "rss_method", "heap_trim",
    "peak_cuda_bytes", "peak_cuda_delta_bytes", "cuda_initialized", "loadavg_1m", "trace",
)
"""Columns in order (fields of :class:`~sbprof.analysis.cell_rows.CellRow`, or of its ``memory`` block for
:data:`MEMORY`); RTF columns are unitless, ``*_s`` seconds, ``*_bytes`` bytes, GB = 10^9 bytes."""
MEMORY = ("peak_rss_bytes", "peak_rss_delta_bytes", "rss_method", "heap_trim", "peak_cuda_bytes",
          "peak_cuda_delta_bytes")


def predicted_message(row: CellRow) -> str:
    """A predicted row's message: why it was predicted, then each figure's 95 % interval or its bound.

    Example
    -------
    >>> from sbprof.analysis.cell_rows import PredictedInterval
    >>> predicted_message(CellRow(status="predicted", why="skipped", intervals=[
    ...     PredictedInterval("rtf", 0.1, 0.2), PredictedInterval("peak_memory_gb", 1.5, beyond="too far")]))
    'predicted (skipped); 95 % intervals: rtf [0.1, 0.2]; peak_memory_gb beyond the measured range, >= 1.5 (too far);'
    """
    text = f"predicted ({row.why}); 95 % intervals:"
    for i in row.intervals:
        if i.beyond is not None:
            bound = f">= {i.low:.4g}" if i.low is not None else "unbounded"
            text += f" {i.name} beyond the measured range, {bound} ({i.beyond});"
        else:
            text += f" {i.name} [{i.low:.4g}, {i.high:.4g}];"
    return text


def render_csv(rows: Sequence[CellRow]) -> str:
    """The rows as CSV text (empty cells where a figure does not apply).

    Example
    -------
    >>> render_csv([CellRow(model="m", audio_s=1, batch_size=2, status="skipped")]).splitlines()[1].split(",")[:11]
    ['m', '', '', '', '', '', '1', '2', '', '', 'skipped']
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = {k: getattr(row.memory, k, None) if k in MEMORY else getattr(row, k) for k in COLUMNS}
        if row.status == "predicted":
            values["message"] = predicted_message(row)
        writer.writerow({k: ("" if v is None else v) for k, v in values.items()})
    return out.getvalue()
