"""A stream job's results analysed once: per cell the latency figures, per setting the capacity and offline RTFx.

Every figure comes from the per-chunk columns a cell's record keeps
(``extra["chunks"]``: stream, index, samples, arrival, start and end of each
chunk, tokens, memory; times in seconds after the session's start), pooled
over a cell's runs. The definitions, which the report prints beside its
tables:

- compute latency: the outside clock around one ``transcribe_chunk`` call,
  every chunk the server processed (flush chunks included);
- real-time margin: chunk duration / (streams x p99 compute); below 1 the
  server cannot keep up (:func:`realtime_margin`, also the capacity criterion);
- algorithmic latency: chunk duration + the feature extractor's look-ahead;
- delay: a chunk's output time minus the arrival of its last sample (queue + compute);
- first token: output of a stream's first chunk that emitted a token minus the arrival of its first sample;
- final result: output of a stream's last (flush) chunk minus the arrival of the utterance's last sample;
- cost growth: median compute of the last third of a stream's full chunks over that of the first third
  (chunk 0 left out); about 1 when the left context is bounded.

Pure: no torch, no clocks. The renderers (:mod:`sbprof.report.stream`) format the :class:`StreamSummary`.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.record.cell import setting_name
from sbprof.record import Measurement
from sbprof.record.results import Results
from sbprof.runs import group_runs, representative
from sbprof.stats import quantile

MS = 1e3
MB = 1e6
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def realtime_margin(compute_s: Sequence[float], streams: int, chunk_s: float) -> float:
    """Chunk duration / (streams x p99 compute): at least 1 when one process keeps up with ``streams`` streams.

    Example
    -------
    >>> realtime_margin([0.02] * 100, 1, 0.32), realtime_margin([0.08] * 100, 2, 0.32)
    (16.0, 2.0)
    """
    return chunk_s / (streams * quantile(compute_s, 0.99))


def real_time(compute_s: Sequence[float], streams: int, chunk_s: float, unserved: int = 0) -> bool:
    """The capacity criterion: every chunk served (the session never fell ``max_backlog_s`` behind) and a
    real-time margin of at least 1.

    Example
    -------
    >>> real_time([0.032] * 50, 2, 0.08), real_time([0.032] * 50, 3, 0.08), real_time([0.01], 1, 0.08, unserved=3)
    (True, False, False)
    """
    return unserved == 0 and realtime_margin(compute_s, streams, chunk_s) >= 1


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


@dataclass(frozen=True)
class StreamTimes:
    """The per-stream figures of one cell (every run's streams pooled): first token, final result (seconds)."""

    first_token_s: List[Optional[float]]
    final_s: List[float]


def stream_times(chunks: Dict[str, List[Any]], sample_rate: int) -> StreamTimes:
    """First token and final result of each stream of one session (see the module docstring).

    Example
    -------
    >>> cols = {"stream": [0, 0, 0], "index": [0, 1, 2], "samples": [100, 50, 0], "arrival_s": [1.0, 1.5, 1.5],
    ...         "end_s": [1.2, 1.7, 1.9], "tokens": [0, 3, 0]}
    >>> stream_times(cols, 100)
    StreamTimes(first_token_s=[1.7], final_s=[0.3999999999999999])
    """
    first: List[Optional[float]] = []
    final: List[float] = []
    for stream in sorted(set(chunks["stream"])):
        rows = sorted((chunks["index"][i], i) for i, s in enumerate(chunks["stream"]) if s == stream)
        start = chunks["arrival_s"][rows[0][1]] - chunks["samples"][rows[0][1]] / sample_rate
        emitted = [i for _, i in rows if (chunks["tokens"][i] or 0) > 0]
        first.append(chunks["end_s"][emitted[0]] - start if emitted else None)
        last = rows[-1][1]
        final.append(chunks["end_s"][last] - chunks["arrival_s"][last])
    return StreamTimes(first, final)


def cost_growth(chunks: Dict[str, List[Any]], compute_s: Sequence[float], chunk_samples: int) -> Optional[float]:
    """Median compute of the last third of full chunks (by position) over the first third, chunk 0 left out.

    Example
    -------
    >>> cols = {"index": [0, 1, 2, 3, 4, 5, 6], "samples": [10] * 7}
    >>> cost_growth(cols, [9.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0], 10)
    3.0
    """
    by_position: Dict[int, List[float]] = {}
    for i, (index, samples) in enumerate(zip(chunks["index"], chunks["samples"])):
        if index > 0 and samples == chunk_samples:
            by_position.setdefault(index, []).append(compute_s[i])
    series = [statistics.median(by_position[k]) for k in sorted(by_position)]
    third = len(series) // 3
    if third < 1:
        return None
    return statistics.median(series[-third:]) / statistics.median(series[:third])


@dataclass(frozen=True)
class LatencyRow:
    """One latency cell of one setting (runs pooled): the figures of the report's tables, in ms and MB."""

    record: Measurement
    chunk_size: int
    left_context: int
    streams: int
    runs: int
    chunk_ms: Optional[float] = None
    chunks: int = 0
    compute_ms: Dict[str, float] = field(default_factory=dict)
    margin: Optional[float] = None
    algorithmic_ms: Optional[float] = None
    delay_ms: Dict[str, float] = field(default_factory=dict)
    first_token_ms: Optional[float] = None
    final_ms: Optional[float] = None
    tokens_per_chunk: Optional[float] = None
    growth: Optional[float] = None
    process_peak_mb: Optional[float] = None
    per_stream_mb: Optional[float] = None
    unserved: int = 0
    compute_sorted_ms: List[float] = field(default_factory=list)
    delay_sorted_ms: List[float] = field(default_factory=list)


@dataclass(frozen=True)
class Probe:
    """One capacity probe: ``streams`` served at once, its p99 compute and delay (ms), its margin, whether it
    met the capacity criterion (:func:`real_time`) and the chunks left unserved when it fell too far behind."""

    streams: int
    p99_ms: float
    delay_p99_ms: float
    margin: float
    real_time: bool
    unserved: int = 0


@dataclass(frozen=True)
class CapacityRow:
    """A setting's capacity search: the streams per machine (median over runs), the probes of its first run."""

    record: Measurement
    chunk_size: int
    left_context: int
    chunk_ms: Optional[float]
    capacity: Optional[float]
    runs: int
    max_streams: int
    probes: List[Probe] = field(default_factory=list)


@dataclass(frozen=True)
class StreamSetting:
    """One (device, threads): its latency cells, capacity search, offline RTFx and machine load."""

    device: str
    threads: int
    rows: List[LatencyRow]
    capacity: Optional[CapacityRow]
    offline: Optional[Measurement]
    offline_rtfx: Optional[float]
    loads: Optional[Tuple[float, float]]

    @property
    def name(self) -> str:
        """Filesystem-safe, e.g. ``cpu-1threads`` (the plots' file names)."""
        return setting_name(self.device, self.threads)


@dataclass(frozen=True)
class StreamSummary:
    """Everything a stream job's reports show (see the module docstring)."""

    model: str
    rules: Dict[str, Any]
    machine: Dict[str, Any]
    settings: List[StreamSetting]


def _params(m: Measurement) -> Tuple[str, int, int]:
    p = m.cell.params
    return str(p.get("kind")), int(p.get("chunk_size") or 0), int(p.get("left_context_chunks") or 0)


def _latency_row(runs: Sequence[Measurement]) -> LatencyRow:
    rep = representative(runs)
    kind, chunk_size, left = _params(rep)
    streams = int(rep.cell.params.get("streams", 1))
    ok = [m for m in runs if m.ok and m.wall_s]
    base = dict(record=rep, chunk_size=chunk_size, left_context=left, streams=streams, runs=len(ok))
    if not ok:
        return LatencyRow(**base)
    rate, samples = int(rep.extra["sample_rate"]), int(rep.extra["chunk_samples"])
    compute = [s for m in ok for s in m.wall_s]
    delays = [e - a for m in ok for e, a in zip(m.extra["chunks"]["end_s"], m.extra["chunks"]["arrival_s"])]
    times = [stream_times(m.extra["chunks"], rate) for m in ok]
    tokens = [t for m in ok for t in m.extra["chunks"]["tokens"] if t is not None]
    right = rep.extra.get("right_context_samples")
    chunk_s = samples / rate
    mem = [m.memory for m in ok if m.memory is not None]
    peak = _median([x.peak_cuda_bytes if rep.cell.device.startswith("cuda") else x.peak_rss_bytes for x in mem])
    added = _median([x.peak_cuda_delta_bytes if rep.cell.device.startswith("cuda") else x.peak_rss_delta_bytes
                     for x in mem])
    return LatencyRow(
        **base, chunk_ms=chunk_s * MS, chunks=len(compute),
        compute_ms={**{k: quantile(compute, q) * MS for k, q in PERCENTILES}, "max": max(compute) * MS},
        margin=realtime_margin(compute, streams, chunk_s),
        algorithmic_ms=None if right is None else (samples + right) / rate * MS,
        delay_ms={k: quantile(delays, q) * MS for k, q in PERCENTILES},
        first_token_ms=_scaled(_median([t for s in times for t in s.first_token_s]), MS),
        final_ms=_scaled(_median([t for s in times for t in s.final_s]), MS),
        tokens_per_chunk=_median(tokens),
        growth=_median([cost_growth(m.extra["chunks"], m.wall_s, samples) for m in ok]),
        process_peak_mb=_scaled(peak, 1 / MB), per_stream_mb=_scaled(added, 1 / MB / streams),
        unserved=sum(int(m.extra.get("unserved_chunks", 0)) for m in ok),
        compute_sorted_ms=sorted(s * MS for s in compute), delay_sorted_ms=sorted(d * MS for d in delays))


def _scaled(value: Optional[float], factor: float) -> Optional[float]:
    return None if value is None else value * factor


def probes_of(m: Measurement) -> List[Probe]:
    """The probes a capacity record keeps, with their figures recomputed from the raw samples."""
    chunk_s = m.extra["chunk_samples"] / m.extra["sample_rate"]
    return [Probe(p["streams"], quantile(p["compute_s"], 0.99) * MS, quantile(p["delay_s"], 0.99) * MS,
                  realtime_margin(p["compute_s"], p["streams"], chunk_s),
                  real_time(p["compute_s"], p["streams"], chunk_s, p.get("unserved_chunks", 0)),
                  p.get("unserved_chunks", 0)) for p in m.extra.get("probes", [])]


def _capacity_row(runs: Sequence[Measurement]) -> CapacityRow:
    rep = representative(runs)
    _, chunk_size, left = _params(rep)
    ok = [m for m in runs if m.ok and m.extra.get("probes")]
    found = [max((p.streams for p in probes_of(m) if p.real_time), default=0) for m in ok]
    chunk_ms = rep.extra["chunk_samples"] / rep.extra["sample_rate"] * MS if ok else None
    return CapacityRow(record=rep, chunk_size=chunk_size, left_context=left, chunk_ms=chunk_ms,
                       capacity=statistics.median(found) if found else None, runs=len(ok),
                       max_streams=int(rep.cell.params.get("max_streams", 0)),
                       probes=sorted(probes_of(ok[0]), key=lambda p: p.streams) if ok else [])


def _offline_rtfx(runs: Sequence[Measurement]) -> Optional[float]:
    values = [m.audio_seconds / statistics.median(m.wall_s) for m in runs if m.ok and m.wall_s and m.audio_seconds]
    return statistics.median(values) if values else None


def analyse(results: Results) -> StreamSummary:
    """The one analysis of a stream job's results (see the module docstring)."""
    settings: Dict[Tuple[str, int], Dict[str, Any]] = {}
    for runs in group_runs(results.records).values():
        rep = representative(runs)
        s = settings.setdefault(rep.cell.setting, {"rows": [], "capacity": None, "offline": None, "loads": []})
        s["loads"] += [m.extra["loadavg_1m"] for m in runs if m.extra.get("loadavg_1m") is not None]
        kind = _params(rep)[0]
        if kind == "latency":
            s["rows"].append(_latency_row(runs))
        elif kind == "capacity":
            s["capacity"] = _capacity_row(runs)
        elif kind == "offline":
            s["offline"] = (rep, _offline_rtfx(runs))
    out = []
    for (device, threads), s in sorted(settings.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
        rows = sorted(s["rows"], key=lambda r: (r.chunk_size, r.left_context == -1, r.left_context, r.streams))
        offline, rtfx = s["offline"] or (None, None)
        loads = (min(s["loads"]), max(s["loads"])) if s["loads"] else None
        out.append(StreamSetting(device, threads, rows, s["capacity"], offline, rtfx, loads))
    model = next(iter(results.models), results.records[0].cell.model if results.records else "")
    return StreamSummary(model=model, rules=dict(results.rules), machine=dict(results.machine), settings=out)
