"""Reports of a stream job: ``report.md`` (capacity, then per setting the latency tables), ``results.csv``, plots.

They format a :class:`~sbprof.analysis.stream_summary.StreamSummary` (analysed once,
before): each table is printed with the definition of its figures right
under it. Times in ms, state in kB (10^3 bytes), memory in MB (10^6 bytes).
"""
from __future__ import annotations

import csv
import io
from typing import Any, Collection, Dict, List, Optional, Union

from sbprof.analysis.stream_summary import CapacityRow, LatencyRow, StreamSetting, StreamSummary
from sbprof.report.limits import render_limits
from sbprof.report.format import machine_line, plural, sig3, status_text, table
from sbprof.report.stream_plot import plot_file, render_stream_plots, setting_label
from sbprof.report.stream_text import (CAPACITY_DEFINITIONS, COMPUTE_DEFINITIONS, EMISSION_DEFINITIONS,
                                       LONE_STREAM_NOTE, PACING_DEFINITIONS)

REPORT_FILE = "report.md"
CSV_FILE = "results.csv"

def _ms(x: Optional[float]) -> str:
    return "n/a" if x is None else sig3(x)


def _chunk(r: Any) -> str:
    return f"{r.chunk_size} ({r.chunk_ms:.0f} ms)" if r.chunk_ms is not None else str(r.chunk_size)


def _left(left: int) -> str:
    return "unlimited" if left == -1 else str(left)


def _failed(r: LatencyRow, width: int) -> List[str]:
    return [_chunk(r), _left(r.left_context), str(r.streams), status_text(r.outcome) or "no samples"] + [""] * width


def _interval(r: LatencyRow) -> str:
    if r.p99_interval_ms is None:
        return "n/a"
    lo, hi, open_ = r.p99_interval_ms
    return f"{sig3(lo)}-{sig3(hi)}{'+' if open_ else ''}"


def _cpu_cost(r: LatencyRow) -> str:
    if r.cpu_cost is None:
        return "n/a"
    median, low, high = r.cpu_cost
    return f"{median:.3f} [{low:.3f}, {high:.3f}]"


def compute_table(rows: List[LatencyRow]) -> str:
    headers = ["chunk", "left context", "streams", "chunks", "p50", "p90", "p99", "max (ms)", "p99 interval (ms)",
               "streaming RTF", "CPU cost (core-s/s) [interval]", "utilisation", "tokens/chunk", "tokens/s", "cost growth", "compute budget"]
    out = []
    for r in rows:
        if not r.compute_ms:
            out.append(_failed(r, len(headers) - 4))
            continue
        c = r.compute_ms
        served = str(r.chunks) + (f" (stopped, {r.unserved} unserved)" if r.unserved else "")
        out.append([_chunk(r), _left(r.left_context), str(r.streams), served]
                   + [sig3(c[k]) for k in ("p50", "p90", "p99", "max")]
                   + [_interval(r), "n/a" if r.streaming_rtf is None else f"{r.streaming_rtf:.3f}", _cpu_cost(r),
                      "n/a" if r.utilisation is None else f"{r.utilisation:.2f}",
                      "n/a" if r.tokens_per_chunk is None else f"{r.tokens_per_chunk:.2f}",
                      "n/a" if r.tokens_per_audio_s is None else sig3(r.tokens_per_audio_s),
                      "n/a" if r.growth is None else f"{r.growth:.2f}", f"{r.margin:.2f}"])
    return table(out, headers)


def _growth(r: Any) -> str:
    slope = r.delay_growth
    text = "n/a" if slope is None else sig3(slope * 1e3)
    return text + (" (behind)" if r.behind else "")


def pacing_table(rows: List[LatencyRow]) -> str:
    headers = ["chunk", "left context", "streams", "algorithmic latency (ms)", "delay steady p50 (ms)",
               "delay steady p99 (ms)", "end of utterance p99 (ms)", "delay growth (ms/s)", "first token (ms)",
               "final result (ms)", "state per stream held (addressed) (kB)", "process peak (MB)"]
    out = []
    for r in rows:
        if not r.delay_ms:
            out.append(_failed(r, len(headers) - 4))
            continue
        out.append([_chunk(r), _left(r.left_context), str(r.streams), _ms(r.algorithmic_ms),
                    sig3(r.delay_ms["p50"]), sig3(r.delay_ms["p99"]), _ms(r.end_delay_ms.get("p99")), _growth(r),
                    _ms(r.first_token_ms), _ms(r.final_ms), _state(r.state_kb, r.state_view_kb),
                    _ms(r.process_peak_mb)])
    return table(out, headers)


def emission_table(rows: List[LatencyRow]) -> Optional[str]:
    kept = [r for r in rows if r.emission_ms]
    if not kept:
        return None
    return table([[_chunk(r), _left(r.left_context), str(r.streams), str(r.emission_tokens),
                   sig3(r.emission_ms["p50"]), sig3(r.emission_ms["p99"])] for r in kept],
                 ["chunk", "left context", "streams", "tokens matched", "emission p50 (ms)", "emission p99 (ms)"])


def _probes(c: CapacityRow) -> str:
    counts: Dict[int, List[str]] = {}
    for p in c.probes:
        counts.setdefault(p.streams, []).append(_ms(p.delay_p99_ms) + (" (behind)" if p.behind else ""))
    return ", ".join(f"{n}: {' / '.join(delays)}" for n, delays in sorted(counts.items()))


def _span(value: Any, low: Any, high: Any) -> str:
    return f"{value:g}" + ("" if low is None else f" [{low:g}, {high:g}]")


def _state(held: Optional[float], addressed: Optional[float]) -> str:
    return _ms(held) + ("" if addressed is None else f" ({sig3(addressed)})")


def _marginal(c: CapacityRow) -> str:
    if c.marginal_mb is None:
        return "n/a" + (f" ({c.marginal_why})" if c.marginal_why else "")
    value, low, high = c.marginal_mb
    return f"{sig3(value)} [{sig3(low)}, {sig3(high)}]"


def _share(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def capacity_table(summary: StreamSummary) -> str:
    """Capacity across settings: one row per thread setting, chunk size and left context searched."""
    headers = ["setting", "chunk", "left context", "delay target (ms)", "streams per machine [range]",
               "p99 delay at capacity (ms)", "wait for a core at capacity", "worst-case compute budget [interval]",
               "state per stream held (addressed) (kB)", "memory per added stream (MB) [95 % interval]",
               "server's own time per chunk (µs)", "offline RTFx (range)", "probes (streams: p99 delay ms)"]
    blank = [""] * 6
    rows = []
    for s in summary.settings:
        rtfx = "not measured" if s.offline_rtfx is None else sig3(s.offline_rtfx)
        if s.offline_range is not None:
            rtfx += f" ({sig3(s.offline_range[0])}-{sig3(s.offline_range[1])})"
        if s.offline is not None and not s.offline.ok:
            rtfx = status_text(s.offline) or rtfx
        if not s.capacities:
            rows.append([setting_label(s), "", "", "", "not searched"] + blank + [rtfx, ""])
        for c in s.capacities:
            if c.capacity is None:
                rows.append([setting_label(s), _chunk(c), _left(c.left_context), _ms(c.target_ms),
                             status_text(c.outcome) or "no probes"] + blank + [rtfx, ""])
                continue
            found = (_span(c.capacity, c.capacity_low, c.capacity_high)
                     + (" (the search's limit)" if c.capacity >= c.max_streams else ""))
            rows.append([setting_label(s), _chunk(c), _left(c.left_context), _ms(c.target_ms), found,
                         _ms(c.delay_p99_ms), _share(c.waited_share),
                         "n/a" if c.budget is None else _span(c.budget, c.budget_low, c.budget_high),
                         _state(c.state_kb, c.state_view_kb), _marginal(c), _ms(c.own_us), rtfx, _probes(c)])
    return table(rows, headers)


def _traffic_text(traffic: str) -> str:
    return {"spread": "streams' utterances at phases spread over the utterance (one stream ends at a time), "
                      "chunks of the streams evenly interleaved",
            "poisson": "sessions arriving at random (Poisson), as many live on average as the stream count",
            "aligned": "every stream sending the utterance once, staggered within one chunk (all end together)"
            }.get(traffic, traffic)


def _header(summary: StreamSummary) -> List[str]:
    rules, machine = summary.rules, summary.machine
    utterance = rules.utterance_s
    source = str(rules.input).split(":sha256")[0]
    out = [f"Every stream sends the same utterance ({source}, "
           f"{'?' if utterance is None else f'{utterance:.2f}'} s); traffic: "
           f"{_traffic_text(str(rules.traffic))}; {rules.warmup} unmeasured chunk(s) on "
           f"a throw-away stream before each cell, then {plural(int(rules.measured or 1), 'pass', 'passes')}"
           " per cell."]
    out.append(f"Machine: {machine_line(machine)}.")
    if summary.loads is not None:
        out.append(f"Machine load (1-minute load average after each cell): {summary.loads[0]:.2f} to "
                   f"{summary.loads[1]:.2f}.")
    return [" ".join(out), ""]


def _lone_note(s: StreamSetting) -> List[str]:
    ratios = [c.lone_ratio for c in s.capacities if c.lone_ratio]
    if not ratios or not any(r.streams == 1 for r in s.rows):
        return []
    return [LONE_STREAM_NOTE.format(ratio=f"{ratios[0]:.1f}x"), ""]


def render_markdown(summary: StreamSummary, plots: Collection[str] = ()) -> str:
    """The report: capacity across settings beside the offline RTFx, then per setting the compute and pacing
    tables, each with its definitions, and the plots (``plots``: the plot files rendered); last, what limits this.

    Example
    -------
    >>> from sbprof.analysis.stream import analyse
    >>> from sbprof.record import Results
    >>> render_markdown(analyse(Results("stream"))).splitlines()[0]
    '# Streaming latency'
    """
    out = [f"# Streaming latency{': ' + summary.model if summary.model else ''}", ""] + _header(summary)
    out += ["## Capacity: streams per machine within a delay target", "", capacity_table(summary), "",
            CAPACITY_DEFINITIONS, ""]
    for s in summary.settings:
        out += [f"## {setting_label(s)}", ""]
        if s.rows:
            out += ["### Chunk compute latency and cost", "", compute_table(s.rows), "", COMPUTE_DEFINITIONS, ""]
            out += _lone_note(s)
            out += ["### Latency under real-time pacing, and memory", "", pacing_table(s.rows), "",
                    PACING_DEFINITIONS, ""]
            if s.marginal_mb or s.marginal_why:
                given = [f"chunk {c}, left {_left(left)}: {sig3(v)} MB [{sig3(lo)}, {sig3(hi)}]"
                         for (c, left), (v, lo, hi) in sorted(s.marginal_mb.items())]
                given += [f"chunk {c}, left {_left(left)}: not given ({why})"
                          for (c, left), why in sorted(s.marginal_why.items())]
                out += ["Memory per added stream (least-squares slope, with its 95 % interval, of what each cell "
                        "added to the process's memory, over the cells' stream counts): " + "; ".join(given) + ".",
                        ""]
            emission = emission_table(s.rows)
            if emission:
                out += ["### Emission latency against the reference alignment", "", emission, "",
                        EMISSION_DEFINITIONS, ""]
        out += [f"![{kind}]({plot_file(kind, s)})" for kind in ("tradeoff", "cdf", "streams")
                if plot_file(kind, s) in plots]
        out.append("")
    out += [render_limits(summary.limits), ""]
    return "\n".join(out)


CSV_FIELDS = ("kind", "device", "threads", "chunk_size", "chunk_ms", "left_context_chunks", "streams", "traffic",
              "status", "runs", "chunks", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "p99_low_ms",
              "p99_high_ms", "compute_budget", "algorithmic_ms", "delay_p50_ms", "delay_p99_ms", "end_delay_p99_ms",
              "delay_growth_ms_per_s", "behind", "first_token_ms", "final_ms", "tokens_per_chunk",
              "tokens_per_audio_s", "cost_growth", "streaming_rtf", "cpu_cost", "cpu_cost_low", "cpu_cost_high",
              "utilisation", "state_kb", "state_addressed_kb", "process_peak_mb",
              "emission_p50_ms", "emission_p99_ms", "delay_target_ms", "streams_per_machine",
              "streams_per_machine_low", "streams_per_machine_high", "delay_p99_at_capacity_ms",
              "core_wait_share_at_capacity", "worst_case_budget_streams", "worst_case_budget_low",
              "worst_case_budget_high", "memory_per_added_stream_mb", "memory_per_added_stream_low_mb",
              "memory_per_added_stream_high_mb", "server_own_time_per_chunk_us",
              "offline_rtfx", "offline_rtfx_min", "offline_rtfx_max", "message")


def render_csv(summary: StreamSummary) -> str:
    """One row per latency cell (runs pooled), per capacity search and per offline call."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for s in summary.settings:
        base = {"device": s.device, "threads": s.threads}
        for r in s.rows:
            row: Dict[str, Any] = {**base, "kind": "latency", "chunk_size": r.chunk_size, "chunk_ms": r.chunk_ms,
                                   "left_context_chunks": r.left_context, "streams": r.streams, "traffic": r.traffic,
                                   "status": r.outcome.status, "runs": r.runs, "chunks": r.chunks,
                                   "message": r.outcome.message}
            row.update({f"{k}_ms": v for k, v in r.compute_ms.items()})
            if r.p99_interval_ms:
                row.update(p99_low_ms=r.p99_interval_ms[0], p99_high_ms=r.p99_interval_ms[1])
            row.update(compute_budget=r.margin, algorithmic_ms=r.algorithmic_ms, delay_p50_ms=r.delay_ms.get("p50"),
                       delay_p99_ms=r.delay_ms.get("p99"), end_delay_p99_ms=r.end_delay_ms.get("p99"),
                       delay_growth_ms_per_s=None if r.delay_growth is None else r.delay_growth * 1e3,
                       behind=r.behind if r.delay_ms else None, first_token_ms=r.first_token_ms, final_ms=r.final_ms,
                       tokens_per_chunk=r.tokens_per_chunk, tokens_per_audio_s=r.tokens_per_audio_s,
                       cost_growth=r.growth, streaming_rtf=r.streaming_rtf, utilisation=r.utilisation,
                       **dict(zip(("cpu_cost", "cpu_cost_low", "cpu_cost_high"), r.cpu_cost or ())),  # core-s/s
                       state_kb=r.state_kb, state_addressed_kb=r.state_view_kb, process_peak_mb=r.process_peak_mb,
                       emission_p50_ms=r.emission_ms.get("p50"), emission_p99_ms=r.emission_ms.get("p99"))
            writer.writerow(row)
        for c in s.capacities:
            writer.writerow({**base, "kind": "capacity", "chunk_size": c.chunk_size, "chunk_ms": c.chunk_ms,
                             "left_context_chunks": c.left_context, "traffic": c.traffic, "status": c.outcome.status,
                             "runs": c.runs, "delay_target_ms": c.target_ms, "streams_per_machine": c.capacity,
                             "streams_per_machine_low": c.capacity_low, "streams_per_machine_high": c.capacity_high,
                             "delay_p99_at_capacity_ms": c.delay_p99_ms, "core_wait_share_at_capacity": c.waited_share,
                             "worst_case_budget_streams": c.budget, "worst_case_budget_low": c.budget_low,
                             "worst_case_budget_high": c.budget_high, "state_kb": c.state_kb,
                             "state_addressed_kb": c.state_view_kb,
                             **dict(zip(("memory_per_added_stream_mb", "memory_per_added_stream_low_mb",
                                         "memory_per_added_stream_high_mb"), c.marginal_mb or ())),
                             "server_own_time_per_chunk_us": c.own_us, "message": c.outcome.message})
        if s.offline is not None:
            writer.writerow({**base, "kind": "offline", "status": s.offline.status, "offline_rtfx": s.offline_rtfx,
                             "offline_rtfx_min": s.offline_range[0] if s.offline_range else None,
                             "offline_rtfx_max": s.offline_range[1] if s.offline_range else None,
                             "message": s.offline.message})
    return buf.getvalue()


def render(summary: StreamSummary) -> Dict[str, Union[str, bytes]]:
    """``report.md``, ``results.csv`` and the plots, by file name."""
    plots = render_stream_plots(summary)
    return {REPORT_FILE: render_markdown(summary, plots), CSV_FILE: render_csv(summary), **plots}
