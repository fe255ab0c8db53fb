"""Reports of a stream job: ``report.md`` (capacity, then per setting the latency tables), ``results.csv``, plots.

They format a :class:`~sbprof.analysis.stream.StreamSummary` (analysed once,
before): each table is printed with the definition of its figures right
under it. Times in ms, memory in MB (10^6 bytes).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from sbprof.analysis.stream import CapacityRow, LatencyRow, StreamSummary
from sbprof.report.format import plural, sig3, status_text, table
from sbprof.report.stream_plot import render_stream_plots, setting_label
from sbprof.results.files import atomic_write_text

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"

CAPACITY_DEFINITIONS = """\
- **streams per machine**: the largest number of concurrent streams one process serves in real time at p99:
  real-time margin = chunk duration / (streams x p99 chunk compute) >= 1, the streams served as in the tables
  below (real-time pacing, one queue), and no chunk left unserved (a probe that fell `max_backlog_s` behind
  stopped: "stopped"). Found by bisection on the stream count (median over runs when several); the probes of
  the first run are listed with their margin.
- **offline RTFx**: seconds of the utterance / time to transcribe it in one `transcribe_chunk` call (one chunk
  spanning it: full attention, as offline), median of 3 calls after 1 unmeasured. As many streams as the offline
  RTFx is what offline throughput would promise; the capacity shows what chunking, queueing and the p99 leave."""

COMPUTE_DEFINITIONS = """\
- **chunk**: encoder frames per chunk (`DynChunkTrainConfig.chunk_size`) and the audio it holds;
  **left context**: past chunks each chunk attends to (unlimited: every past chunk of the utterance).
- **chunks**: chunk calls timed (all streams and runs; the short last chunk and the zero chunk that flushes
  the feature extractor included). A session whose next chunk had waited more than `max_backlog_s` stopped
  there (it cannot keep up): *stopped* rows count the chunks left unserved, and their figures cover only
  the chunks served.
- **p50 ... max**: percentiles of chunk compute latency, the wall clock around one `transcribe_chunk` call (ms).
- **real-time margin**: chunk duration / (streams x p99 compute); below 1 the process cannot keep up.
- **tokens/chunk**: median tokens one chunk emitted.
- **cost growth**: median compute of the last third of full chunks along the utterance over that of the first
  third (chunk 0 left out): about 1 when the left context is bounded, above 1 when each chunk costs more than
  the last."""

PACING_DEFINITIONS = """\
- Chunks are fed at the pace the audio would arrive: stream i starts i/n of a chunk after stream 0, a chunk
  arrives when its last sample would have been spoken, and one loop serves every stream in order of arrival,
  sleeping when it is ahead; when compute falls behind, chunks queue.
- **algorithmic latency**: chunk duration + the feature extractor's look-ahead (the last frames of a chunk
  come out with the next one): what a chunk's first sample waits before any compute.
- **delay p50 / p99**: from the arrival of a chunk's last sample to its output (queue + compute).
- **first token**: from a stream's first sample to the output of its first chunk that emitted a token
  (median over streams).
- **final result**: from the utterance's last sample to the output of the stream's last (flush) chunk
  (median over streams).
- **process peak**: the whole process's peak resident memory during the cell (model included; on CUDA the
  allocator's peak); **per stream**: the peak the cell added over what the process held before it (heap
  trimmed first), divided by the streams."""


def _ms(x: Optional[float]) -> str:
    return "n/a" if x is None else sig3(x)


def _chunk(r: Any) -> str:
    return f"{r.chunk_size} ({r.chunk_ms:.0f} ms)" if r.chunk_ms is not None else str(r.chunk_size)


def _left(left: int) -> str:
    return "unlimited" if left == -1 else str(left)


def _failed(r: LatencyRow, width: int) -> List[str]:
    return [_chunk(r), _left(r.left_context), str(r.streams), status_text(r.record) or "no samples"] + [""] * width


def compute_table(rows: List[LatencyRow]) -> str:
    headers = ["chunk", "left context", "streams", "chunks", "p50", "p90", "p95", "p99", "max (ms)",
               "real-time margin", "tokens/chunk", "cost growth"]
    out = []
    for r in rows:
        if not r.compute_ms:
            out.append(_failed(r, len(headers) - 4))
            continue
        c = r.compute_ms
        served = str(r.chunks) + (f" (stopped, {r.unserved} unserved)" if r.unserved else "")
        out.append([_chunk(r), _left(r.left_context), str(r.streams), served]
                   + [sig3(c[k]) for k in ("p50", "p90", "p95", "p99", "max")]
                   + [f"{r.margin:.2f}" + ("" if r.margin >= 1 else " (behind)"),
                      "n/a" if r.tokens_per_chunk is None else f"{r.tokens_per_chunk:g}",
                      "n/a" if r.growth is None else f"{r.growth:.2f}"])
    return table(out, headers)


def pacing_table(rows: List[LatencyRow]) -> str:
    headers = ["chunk", "left context", "streams", "algorithmic latency (ms)", "delay p50 (ms)", "delay p99 (ms)",
               "first token (ms)", "final result (ms)", "process peak (MB)", "per stream (MB)"]
    out = []
    for r in rows:
        if not r.delay_ms:
            out.append(_failed(r, len(headers) - 4))
            continue
        out.append([_chunk(r), _left(r.left_context), str(r.streams), _ms(r.algorithmic_ms),
                    sig3(r.delay_ms["p50"]), sig3(r.delay_ms["p99"]), _ms(r.first_token_ms), _ms(r.final_ms),
                    _ms(r.process_peak_mb), _ms(r.per_stream_mb)])
    return table(out, headers)


def _capacity_cell(c: Optional[CapacityRow]) -> List[str]:
    if c is None:
        return ["", "", "not searched", ""]
    if c.capacity is None:
        return [_chunk(c), _left(c.left_context), status_text(c.record) or "no probes", ""]
    found = f"{c.capacity:g}" + (" (the search's limit)" if c.capacity >= c.max_streams else "")
    probes = ", ".join(f"{p.streams}: {p.margin:.2f}" + (" (stopped)" if p.unserved else "") for p in c.probes)
    return [_chunk(c), _left(c.left_context), found, probes]


def capacity_table(summary: StreamSummary) -> str:
    headers = ["setting", "chunk", "left context", "streams per machine", "offline RTFx", "probes (streams: margin)"]
    rows = []
    for s in summary.settings:
        chunk, left, found, probes = _capacity_cell(s.capacity)
        rtfx = "not measured" if s.offline_rtfx is None else sig3(s.offline_rtfx)
        if s.offline is not None and not s.offline.ok:
            rtfx = status_text(s.offline) or rtfx
        rows.append([setting_label(s), chunk, left, found, rtfx, probes])
    return table(rows, headers)


def _header(summary: StreamSummary) -> List[str]:
    rules, machine = summary.rules, summary.machine
    utterance = rules.get("utterance_s")
    source = str(rules.get("input", "")).split(":sha256")[0]
    out = [f"Every stream sends the same utterance ({source}, "
           f"{'?' if utterance is None else f'{utterance:.2f}'} s); {rules.get('warmup')} unmeasured chunk(s) on a "
           f"throw-away stream before each cell, then {plural(int(rules.get('measured') or 1), 'pass', 'passes')} "
           "over the utterance."]
    if machine:
        out.append(f"Machine: {machine.get('cpu', '?')} ({machine.get('cpu_count', '?')} logical cores), "
                   f"torch {machine.get('torch', '?')}, speechbrain {machine.get('speechbrain', '?')}"
                   + (f", {machine['gpu']}" if machine.get("gpu") else "") + ".")
    loads = [s.loads for s in summary.settings if s.loads]
    if loads:
        out.append(f"Machine load (1-minute load average after each cell): {min(lo for lo, _ in loads):.2f} to "
                   f"{max(hi for _, hi in loads):.2f}.")
    return [" ".join(out), ""]


def render_markdown(summary: StreamSummary, plots: Optional[Dict[str, str]] = None) -> str:
    """The report: capacity beside the offline RTFx, then per setting the compute and pacing tables, each with
    its definitions, and the plots.

    Example
    -------
    >>> from sbprof.analysis.stream import analyse
    >>> from sbprof.record import Results
    >>> render_markdown(analyse(Results("stream"))).splitlines()[0]
    '# Streaming latency'
    """
    plots = plots or {}
    out = [f"# Streaming latency{': ' + summary.model if summary.model else ''}", ""] + _header(summary)
    out += ["## Capacity: streams per machine", "", capacity_table(summary), "", CAPACITY_DEFINITIONS, ""]
    for s in summary.settings:
        out += [f"## {setting_label(s)}", ""]
        if s.rows:
            out += ["### Chunk compute latency", "", compute_table(s.rows), "", COMPUTE_DEFINITIONS, "",
                    "### Latency under real-time pacing, and memory", "", pacing_table(s.rows), "",
                    PACING_DEFINITIONS, ""]
        out += [f"![{kind}]({plots[f'{kind} {s.name}']})" for kind in ("cdf", "streams")
                if f"{kind} {s.name}" in plots]
        out.append("")
    return "\n".join(out)


CSV_FIELDS = ("kind", "device", "threads", "chunk_size", "chunk_ms", "left_context_chunks", "streams", "status",
              "runs", "chunks", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "realtime_margin",
              "algorithmic_ms", "delay_p50_ms", "delay_p99_ms", "first_token_ms", "final_ms", "tokens_per_chunk",
              "cost_growth", "process_peak_mb", "per_stream_mb", "streams_per_machine", "offline_rtfx", "message")


def render_csv(summary: StreamSummary) -> str:
    """One row per latency cell (runs pooled), per capacity search and per offline call."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for s in summary.settings:
        base = {"device": s.device, "threads": s.threads}
        for r in s.rows:
            row: Dict[str, Any] = {**base, "kind": "latency", "chunk_size": r.chunk_size, "chunk_ms": r.chunk_ms,
                                   "left_context_chunks": r.left_context, "streams": r.streams,
                                   "status": r.record.status, "runs": r.runs, "chunks": r.chunks,
                                   "message": r.record.message}
            row.update({f"{k}_ms": v for k, v in r.compute_ms.items()})
            row.update(realtime_margin=r.margin, algorithmic_ms=r.algorithmic_ms, delay_p50_ms=r.delay_ms.get("p50"),
                       delay_p99_ms=r.delay_ms.get("p99"), first_token_ms=r.first_token_ms, final_ms=r.final_ms,
                       tokens_per_chunk=r.tokens_per_chunk, cost_growth=r.growth,
                       process_peak_mb=r.process_peak_mb, per_stream_mb=r.per_stream_mb)
            writer.writerow(row)
        c = s.capacity
        if c is not None:
            writer.writerow({**base, "kind": "capacity", "chunk_size": c.chunk_size, "chunk_ms": c.chunk_ms,
                             "left_context_chunks": c.left_context, "status": c.record.status, "runs": c.runs,
                             "streams_per_machine": c.capacity, "message": c.record.message})
        if s.offline is not None:
            writer.writerow({**base, "kind": "offline", "status": s.offline.status, "offline_rtfx": s.offline_rtfx,
                             "message": s.offline.message})
    return buf.getvalue()


def write_reports(summary: StreamSummary, folder: Union[str, Path]) -> Dict[str, Path]:
    """Write ``report.md``, ``results.csv`` and the plots into ``folder``; return their paths."""
    folder = Path(folder)
    plots = render_stream_plots(summary, folder)
    paths = {"report": folder / REPORT_FILE, "csv": folder / CSV_FILE}
    atomic_write_text(paths["report"], render_markdown(summary, {k: str(p.relative_to(folder))
                                                                 for k, p in plots.items()}))
    atomic_write_text(paths["csv"], render_csv(summary))
    return {**paths, **{f"plot {k}": p for k, p in plots.items()}}
