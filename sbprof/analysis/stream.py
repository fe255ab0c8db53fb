"""A stream job's results analysed once: per cell the latency figures, per setting the capacities and offline RTFx.

Every figure comes from the per-chunk columns a cell's record keeps
(``extra["chunks"]``: session, chunk index, samples, arrival, start and end
of each chunk, CPU time, time waited for a core, tokens, memory; times in
seconds after the session's start), pooled over a cell's runs. The
definitions, which the report prints beside its tables:

- compute latency: the outside clock around one ``transcribe_chunk`` call,
  every chunk the server processed (flush chunks included);
- delay: a chunk's output time minus the arrival of its last sample (queue +
  compute), over the chunks that hold audio (flush chunks: see final result).
  *Steady*: every chunk but a session's last; *end of utterance*: the chunk
  holding a session's last sample;
- delay growth: the least-squares slope of delay against arrival time (seconds
  of delay per second); *behind* (the backlog grows) when it exceeds
  :data:`BEHIND_SLOPE`, or when chunks were left unserved;
- capacity criterion (:func:`within_target`): nothing unserved, p99 delay
  within the target (default one chunk duration) and not behind;
- worst-case compute budget: chunk duration / (streams x p99 compute) >= 1;
  every chunk costing the p99 with no overlap: a bound below the capacity,
  not a verdict (:func:`budget_margin`);
- algorithmic latency: chunk duration + the feature extractor's look-ahead;
- first token: output of a session's first chunk that emitted a token minus
  the speech onset (the first 10 ms frame within 30 dB of the loudest);
- final result: output of a session's last (flush) chunk minus the arrival of the utterance's last sample;
- streaming RTF: compute / seconds of audio served; utilisation: compute / the session's length;
- state per stream: the bytes of a session's streaming-context tensors after its last chunk;
- memory per added stream: the least-squares slope of the process's memory (the largest reading after a chunk)
  over stream counts (the capacity probes, or the cells of one chunk size and left context);
- cost growth: median compute of the last third of a session's full chunks over that of the first third
  (chunk 0 left out); about 1 when the left context is bounded;
- emission latency (given a reference alignment): the output of the chunk that emitted token k minus the
  reference end of unit k (sessions that start with the utterance).

Pure: no torch, no clocks. The renderers (:mod:`sbprof.report.stream`) format the :class:`StreamSummary`.
:func:`check_stream_record` refuses a hand-edited record before anything reads it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.errors import ConfigError
from sbprof.record.cell import setting_name
from sbprof.record import Measurement
from sbprof.record.results import Results
from sbprof.runs import group_runs, representative
from sbprof.stats import quantile

MS = 1e3
MB = 1e6
KB = 1e3
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))
BEHIND_SLOPE = 0.05
"""Delay growth (seconds of delay per second of session) above which a server is *behind*: its backlog grows
(0.05: 50 ms more delay per second of speech, 3 s per minute)."""
CHUNK_COLUMNS = ("stream", "index", "samples", "arrival_s", "start_s", "end_s", "tokens", "memory_bytes")
"""The per-chunk columns every stream record keeps (``cpu_s`` and ``waited_s`` too since they were added)."""


# -- the criteria, shared with the worker ---------------------------------------------------------------------------

def budget_margin(compute_s: Sequence[float], streams: int, chunk_s: float) -> float:
    """Chunk duration / (streams x p99 compute): the worst-case compute budget (>= 1: fits even if every chunk
    cost the p99 and none overlapped idle time). Not the capacity criterion.

    Example
    -------
    >>> budget_margin([0.02] * 100, 1, 0.32), budget_margin([0.08] * 100, 2, 0.32)
    (16.0, 2.0)
    """
    return chunk_s / (streams * quantile(compute_s, 0.99))


def delay_slope(arrival_s: Sequence[float], delay_s: Sequence[float]) -> Optional[float]:
    """Least-squares slope of delay against arrival (seconds per second); ``None`` with fewer than 3 chunks.

    Example
    -------
    >>> delay_slope([1, 2, 3, 4], [0.1, 0.3, 0.5, 0.7])
    0.2
    """
    n = len(arrival_s)
    if n < 3:
        return None
    mx, my = sum(arrival_s) / n, sum(delay_s) / n
    sxx = sum((x - mx) ** 2 for x in arrival_s)
    if sxx <= 0:
        return None
    return round(sum((x - mx) * (y - my) for x, y in zip(arrival_s, delay_s)) / sxx, 12)


@dataclass(frozen=True)
class Verdict:
    """A session against the capacity criterion: p99 delay (s), delay growth (s/s), unserved chunks, passed."""

    p99_s: Optional[float]
    slope: Optional[float]
    unserved: int
    target_s: float
    passed: bool

    @property
    def behind(self) -> bool:
        return self.unserved > 0 or (self.slope is not None and self.slope > BEHIND_SLOPE)


def audio_rows(chunks: Dict[str, List[Any]]) -> List[int]:
    """The rows of the chunks that hold audio (not flush chunks)."""
    return [i for i, n in enumerate(chunks["samples"]) if n > 0]


def within_target(chunks: Dict[str, List[Any]], target_s: float, unserved: int = 0) -> Verdict:
    """The capacity criterion (see the module docstring) on one session's columns.

    Example
    -------
    >>> cols = {"samples": [10, 10, 10, 0], "arrival_s": [1, 2, 3, 3], "end_s": [1.1, 2.1, 3.1, 3.2]}
    >>> v = within_target(cols, 0.2); (round(v.p99_s, 3), v.slope, v.passed)
    (0.1, 0.0, True)
    >>> within_target({"samples": [10] * 4, "arrival_s": [1, 2, 3, 4], "end_s": [1.1, 2.3, 3.5, 4.7]}, 1.0).behind
    True
    """
    rows = audio_rows(chunks)
    arrival = [chunks["arrival_s"][i] for i in rows]
    delays = [chunks["end_s"][i] - chunks["arrival_s"][i] for i in rows]
    p99 = quantile(delays, 0.99) if delays else None
    slope = delay_slope(arrival, delays)
    v = Verdict(p99, slope, unserved, target_s, False)
    return Verdict(p99, slope, unserved, target_s,
                   passed=p99 is not None and p99 <= target_s and not v.behind)


def utilisation(chunks: Dict[str, List[Any]]) -> Optional[float]:
    """Compute / the session's length (from its start to its last output): the server's busy share."""
    ends = chunks["end_s"]
    if not ends or max(ends) <= 0:
        return None
    return sum(e - s for s, e in zip(chunks["start_s"], ends)) / max(ends)


def capacity_estimate(chunks: Dict[str, List[Any]], streams: int) -> Optional[int]:
    """``floor(streams / utilisation)``: the stream count that would keep the server busy all the time."""
    u = utilisation(chunks)
    return None if not u else int(math.floor(streams / u))


# -- a record read from a file ------------------------------------------------------------------------------------

def _bad(m: Measurement, where: str, what: str) -> ConfigError:
    return ConfigError(f"results.json: record {m.label!r} (run {m.cell.run}): {where} {what}; the file was edited "
                       "or is damaged: remove the record (it is measured again) or restore the file")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_columns(m: Measurement, chunks: Any, where: str) -> None:
    if not isinstance(chunks, dict):
        raise _bad(m, where, f"must be a mapping of per-chunk lists, got {type(chunks).__name__} {chunks!r:.40}")
    for name in CHUNK_COLUMNS:
        if not isinstance(chunks.get(name), list):
            raise _bad(m, f"{where}.{name}", f"must be a list (one value per chunk), got {chunks.get(name)!r:.40}")
    n = len(chunks["stream"])
    for name, values in chunks.items():
        if not isinstance(values, list):
            raise _bad(m, f"{where}.{name}", "must be a list (one value per chunk)")
        if len(values) != n:
            raise _bad(m, f"{where}.{name}", f"holds {len(values)} values where {where}.stream holds {n}: the "
                          "per-chunk lists must have one value per chunk")
    for name in ("stream", "index", "samples"):
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in chunks[name]):
            raise _bad(m, f"{where}.{name}", "must hold integers >= 0")
    for name in ("arrival_s", "start_s", "end_s"):
        if not all(_is_number(v) for v in chunks[name]):
            raise _bad(m, f"{where}.{name}", "must hold finite numbers of seconds")
    if any(e < s for s, e in zip(chunks["start_s"], chunks["end_s"])):
        raise _bad(m, f"{where}.end_s", "holds a chunk that ends before it starts")
    for name in ("tokens", "memory_bytes", "cpu_s", "waited_s"):
        if name in chunks and not all(v is None or (_is_number(v) and v >= 0) for v in chunks[name]):
            raise _bad(m, f"{where}.{name}", "must hold null or numbers >= 0")


def check_stream_record(m: Measurement) -> None:
    """Refuse a stream record whose extra fields a hand edit broke (type, length, range), naming the record and
    the field: one line, before any figure is read.

    Example
    -------
    >>> from sbprof.record import Cell
    >>> m = Measurement(label="chunk 8", cell=Cell(params={"kind": "latency"}), wall_s=[0.1],
    ...                 extra={"chunks": "garbage", "sample_rate": 16000, "chunk_samples": 100})
    >>> check_stream_record(m)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: results.json: record 'chunk 8' (run 0): extra.chunks must be a mapping of per-chunk lists, got str 'garbage'; ...
    """
    kind = m.cell.params.get("kind")
    if kind not in ("latency", "capacity", "offline"):
        raise _bad(m, "cell.params.kind", f"must be latency, capacity or offline, got {kind!r}")
    if not m.ok or kind == "offline":
        return
    for name in ("sample_rate", "chunk_samples"):
        v = m.extra.get(name)
        if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
            raise _bad(m, f"extra.{name}", f"must be a positive integer, got {v!r}")
    if kind == "latency":
        _check_columns(m, m.extra.get("chunks"), "extra.chunks")
        if len(m.wall_s) != len(m.extra["chunks"]["stream"]):
            raise _bad(m, "wall_s", f"holds {len(m.wall_s)} values where extra.chunks.stream holds "
                          f"{len(m.extra['chunks']['stream'])}: one compute time per chunk")
        return
    probes = m.extra.get("probes")
    if not isinstance(probes, list) or not probes:
        raise _bad(m, "extra.probes", f"must be a non-empty list of probes, got {probes!r:.40}")
    for k, p in enumerate(probes):
        where = f"extra.probes[{k}]"
        if not isinstance(p, dict):
            raise _bad(m, where, "must be a mapping")
        if not (isinstance(p.get("streams"), int) and not isinstance(p.get("streams"), bool) and p["streams"] >= 1):
            raise _bad(m, f"{where}.streams", f"must be an integer >= 1, got {p.get('streams')!r}")
        _check_columns(m, p.get("chunks"), f"{where}.chunks")
    if not _is_number(m.extra.get("target_s")) or m.extra["target_s"] <= 0:
        raise _bad(m, "extra.target_s", f"must be a positive number of seconds, got {m.extra.get('target_s')!r}")


# -- per cell -----------------------------------------------------------------------------------------------------

def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _scaled(value: Optional[float], factor: float) -> Optional[float]:
    return None if value is None else value * factor


def quantile_interval(samples: Sequence[float], q: float, z: float = 1.96) -> Tuple[float, float, bool]:
    """A distribution-free ~95 % interval for the ``q`` quantile from order statistics (normal approximation to
    the binomial): ``(low, high, open)``; ``open`` when too few samples bound it above (``high`` is then the
    largest sample, and the true quantile may lie beyond).

    Example
    -------
    >>> quantile_interval(list(range(1, 1001)), 0.99)
    (983, 998, False)
    >>> quantile_interval(list(range(1, 42)), 0.99)
    (39, 41, True)
    """
    xs = sorted(samples)
    n = len(xs)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(1, int(math.floor(n * q - half)))
    hi = int(math.ceil(n * q + half)) + 1
    return xs[lo - 1], xs[min(hi, n) - 1], hi > n


@dataclass(frozen=True)
class SessionTimes:
    """The per-session figures of one cell (runs pooled), seconds: first token, final result, emission latencies."""

    first_token_s: List[float]
    final_s: List[float]
    emission_s: List[float]


def session_times(chunks: Dict[str, List[Any]], sample_rate: int, onset_s: float = 0.0,
                  reference_ends_s: Optional[Sequence[float]] = None) -> SessionTimes:
    """First token (from the speech onset), final result and emission latencies of each session of one pass:
    first token and emission latency only for sessions that start with the utterance, final result only for
    those that end in the window (see the module docstring).

    Example
    -------
    >>> cols = {"stream": [0, 0, 0], "index": [0, 1, 2], "samples": [100, 50, 0], "arrival_s": [1.0, 1.5, 1.5],
    ...         "end_s": [1.2, 1.7, 1.9], "tokens": [0, 3, 0]}
    >>> t = session_times(cols, 100, onset_s=0.5, reference_ends_s=[0.6, 0.7, 1.9]); t.first_token_s, t.final_s
    ([1.2], [0.3999999999999999])
    >>> [round(x, 3) for x in t.emission_s]
    [1.1, 1.0, -0.2]
    """
    first: List[float] = []
    final: List[float] = []
    emission: List[float] = []
    rows_of: Dict[int, List[Tuple[int, int]]] = {}
    for i, s in enumerate(chunks["stream"]):
        rows_of.setdefault(s, []).append((chunks["index"][i], i))
    for rows in rows_of.values():
        rows.sort()
        head = rows[0][1]
        if chunks["samples"][rows[-1][1]] == 0:
            last = rows[-1][1]
            final.append(chunks["end_s"][last] - chunks["arrival_s"][last])
        if rows[0][0] != 0:
            continue  # a session the window opened in the middle of: no start of its own
        start = chunks["arrival_s"][head] - chunks["samples"][head] / sample_rate
        emitted = [i for _, i in rows if (chunks["tokens"][i] or 0) > 0]
        if emitted:
            first.append(chunks["end_s"][emitted[0]] - (start + onset_s))
        if reference_ends_s:
            k = 0
            for _, i in rows:
                for _ in range(chunks["tokens"][i] or 0):
                    if k < len(reference_ends_s):
                        emission.append(chunks["end_s"][i] - (start + reference_ends_s[k]))
                    k += 1
    return SessionTimes(first, final, emission)


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


def split_delays(chunks: Dict[str, List[Any]], utterance_samples: int,
                 chunk_samples: int) -> Tuple[List[float], List[float]]:
    """Delays (s) of the steady chunks and of the end-of-utterance chunks (each holding a session's last sample).

    Example
    -------
    >>> split_delays({"samples": [10, 5, 0], "index": [0, 1, 2], "arrival_s": [1, 1.5, 1.5],
    ...               "end_s": [1.1, 1.7, 1.8]}, 15, 10)
    ([0.10000000000000009], [0.19999999999999996])
    """
    last_index = max(0, math.ceil(utterance_samples / chunk_samples) - 1)
    steady, end = [], []
    for i in audio_rows(chunks):
        d = chunks["end_s"][i] - chunks["arrival_s"][i]
        (end if chunks["index"][i] == last_index else steady).append(d)
    return steady, end


def marginal_bytes(points: Sequence[Tuple[int, float]]) -> Optional[float]:
    """Least-squares slope of process memory (bytes) over stream counts; ``None`` with fewer than 2 counts.

    Example
    -------
    >>> marginal_bytes([(1, 100.0), (2, 150.0), (4, 250.0)])
    50.0
    """
    if len({n for n, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def _peak_reading(chunks: Dict[str, List[Any]]) -> Optional[float]:
    readings = [v for v in chunks.get("memory_bytes", []) if v is not None]
    return max(readings) if readings else None


@dataclass(frozen=True)
class LatencyRow:
    """One latency cell of one setting (runs pooled): the figures of the report's tables, in ms, kB and MB."""

    record: Measurement
    chunk_size: int
    left_context: int
    streams: int
    runs: int
    traffic: str = "aligned"
    chunk_ms: Optional[float] = None
    chunks: int = 0
    compute_ms: Dict[str, float] = field(default_factory=dict)
    p99_interval_ms: Optional[Tuple[float, float, bool]] = None
    margin: Optional[float] = None
    algorithmic_ms: Optional[float] = None
    delay_ms: Dict[str, float] = field(default_factory=dict)
    end_delay_ms: Dict[str, float] = field(default_factory=dict)
    delay_growth: Optional[float] = None
    behind: bool = False
    first_token_ms: Optional[float] = None
    final_ms: Optional[float] = None
    tokens_per_chunk: Optional[float] = None
    tokens_per_audio_s: Optional[float] = None
    growth: Optional[float] = None
    streaming_rtf: Optional[float] = None
    utilisation: Optional[float] = None
    state_kb: Optional[float] = None
    process_peak_mb: Optional[float] = None
    memory_reading_bytes: Optional[float] = None
    emission_ms: Dict[str, float] = field(default_factory=dict)
    emission_tokens: int = 0
    unserved: int = 0
    compute_sorted_ms: List[float] = field(default_factory=list)
    delay_sorted_ms: List[float] = field(default_factory=list)


@dataclass(frozen=True)
class Probe:
    """One capacity probe: ``streams`` served at once; its p99 compute and delay (ms), delay growth (s/s),
    utilisation, largest memory reading (bytes), whether it passed, and the chunks left unserved."""

    streams: int
    p99_ms: float
    delay_p99_ms: Optional[float]
    slope: Optional[float]
    utilisation: Optional[float]
    memory_bytes: Optional[float]
    passed: bool
    unserved: int = 0
    compute_p50_ms: Optional[float] = None

    @property
    def behind(self) -> bool:
        return self.unserved > 0 or (self.slope is not None and self.slope > BEHIND_SLOPE)


@dataclass(frozen=True)
class CapacityRow:
    """A capacity search: the streams per machine within the delay target (median over runs), the probes of its
    first run, the worst-case compute budget, state and memory per added stream."""

    record: Measurement
    chunk_size: int
    left_context: int
    chunk_ms: Optional[float]
    target_ms: Optional[float]
    capacity: Optional[float]
    runs: int
    max_streams: int
    traffic: str = "spread"
    probes: List[Probe] = field(default_factory=list)
    budget: Optional[int] = None
    delay_p99_ms: Optional[float] = None
    state_kb: Optional[float] = None
    marginal_mb: Optional[float] = None
    lone_ratio: Optional[float] = None


@dataclass(frozen=True)
class StreamSetting:
    """One (device, threads): its latency cells, capacity searches, offline RTFx (median, range) and machine load."""

    device: str
    threads: int
    rows: List[LatencyRow]
    capacities: List[CapacityRow]
    offline: Optional[Measurement]
    offline_rtfx: Optional[float]
    loads: Optional[Tuple[float, float]]
    offline_range: Optional[Tuple[float, float]] = None
    marginal_mb: Dict[Tuple[int, int], float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Filesystem-safe, e.g. ``cpu-1threads`` (the plots' file names)."""
        return setting_name(self.device, self.threads)

    @property
    def capacity(self) -> Optional[CapacityRow]:
        return self.capacities[0] if self.capacities else None


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
    base = dict(record=rep, chunk_size=chunk_size, left_context=left, streams=streams, runs=len(ok),
                traffic=str(rep.extra.get("traffic", "aligned")))
    if not ok:
        return LatencyRow(**base)
    rate, samples = int(rep.extra["sample_rate"]), int(rep.extra["chunk_samples"])
    utterance = int(rep.settings.get("utterance_samples") or samples)
    compute = [s for m in ok for s in m.wall_s]
    steady, end, delays, times, verdicts, utils = [], [], [], [], [], []
    audio_s = tokens_total = audio_chunks = 0.0
    for m in ok:
        cols = m.extra["chunks"]
        s_, e_ = split_delays(cols, utterance, samples)
        steady += s_
        end += e_
        delays += [cols["end_s"][i] - cols["arrival_s"][i] for i in audio_rows(cols)]
        times.append(session_times(cols, rate, float(m.extra.get("speech_onset_s") or 0.0),
                                   m.extra.get("reference_ends_s")))
        verdicts.append(within_target(cols, samples / rate, int(m.extra.get("unserved_chunks", 0))))
        utils.append(utilisation(cols))
        audio_s += sum(cols["samples"]) / rate
        audio_chunks += len(audio_rows(cols))
        tokens_total += sum(t for t in cols["tokens"] if t is not None)
    right = rep.extra.get("right_context_samples")
    chunk_s = samples / rate
    mem = [m.memory for m in ok if m.memory is not None]
    cuda = rep.cell.device.startswith("cuda")
    peak = _median([x.peak_cuda_bytes if cuda else x.peak_rss_bytes for x in mem])
    states = [v for m in ok for v in (m.extra.get("state_bytes") or {}).values()]
    emission = [e for t in times for e in t.emission_s]
    any_tokens = any(t is not None for m in ok for t in m.extra["chunks"]["tokens"])
    slopes = [v.slope for v in verdicts if v.slope is not None]
    return LatencyRow(
        **base, chunk_ms=chunk_s * MS, chunks=len(compute),
        compute_ms={**{k: quantile(compute, q) * MS for k, q in PERCENTILES}, "max": max(compute) * MS},
        p99_interval_ms=tuple(x * MS if isinstance(x, float) else x for x in quantile_interval(compute, 0.99)),
        margin=budget_margin(compute, streams, chunk_s),
        algorithmic_ms=None if right is None else (samples + right) / rate * MS,
        delay_ms={k: quantile(steady or delays, q) * MS for k, q in PERCENTILES} if (steady or delays) else {},
        end_delay_ms={k: quantile(end, q) * MS for k, q in (("p50", 0.5), ("p99", 0.99))} if end else {},
        delay_growth=_median(slopes), behind=any(v.behind for v in verdicts),
        first_token_ms=_scaled(_median([t for s in times for t in s.first_token_s]), MS),
        final_ms=_scaled(_median([t for s in times for t in s.final_s]), MS),
        tokens_per_chunk=tokens_total / audio_chunks if any_tokens and audio_chunks else None,
        tokens_per_audio_s=tokens_total / audio_s if any_tokens and audio_s else None,
        growth=_median([cost_growth(m.extra["chunks"], m.wall_s, samples) for m in ok]),
        streaming_rtf=sum(compute) / audio_s if audio_s else None, utilisation=_median(utils),
        state_kb=_scaled(_median(states), 1 / KB), process_peak_mb=_scaled(peak, 1 / MB),
        memory_reading_bytes=_median([_peak_reading(m.extra["chunks"]) for m in ok]),
        emission_ms={k: quantile(emission, q) * MS for k, q in (("p50", 0.5), ("p99", 0.99))} if emission else {},
        emission_tokens=len(emission),
        unserved=sum(int(m.extra.get("unserved_chunks", 0)) for m in ok),
        compute_sorted_ms=sorted(s * MS for s in compute), delay_sorted_ms=sorted(d * MS for d in delays))


def probes_of(m: Measurement) -> List[Probe]:
    """The probes a capacity record keeps, with their figures recomputed from the raw per-chunk columns."""
    rate = m.extra["sample_rate"]
    chunk_s = m.extra["chunk_samples"] / rate
    target = float(m.extra.get("target_s") or chunk_s)
    out = []
    for p in m.extra.get("probes", []):
        cols = p["chunks"]
        compute = [e - s for s, e in zip(cols["start_s"], cols["end_s"])]
        v = within_target(cols, target, int(p.get("unserved_chunks", 0)))
        out.append(Probe(p["streams"], quantile(compute, 0.99) * MS if compute else math.nan,
                         _scaled(v.p99_s, MS), v.slope, utilisation(cols), _peak_reading(cols), v.passed,
                         v.unserved, quantile(compute, 0.5) * MS if compute else None))
    return out


def _capacity_row(runs: Sequence[Measurement]) -> CapacityRow:
    rep = representative(runs)
    _, chunk_size, left = _params(rep)
    ok = [m for m in runs if m.ok and m.extra.get("probes")]
    per_run = [probes_of(m) for m in ok]
    found = [max((p.streams for p in probes if p.passed), default=0) for probes in per_run]
    chunk_s = rep.extra["chunk_samples"] / rep.extra["sample_rate"] if ok else None
    base = dict(record=rep, chunk_size=chunk_size, left_context=left, runs=len(ok),
                max_streams=int(rep.cell.params.get("max_streams", 0)), traffic=str(rep.extra.get("traffic", "spread")),
                chunk_ms=_scaled(chunk_s, MS), target_ms=_scaled(rep.extra.get("target_s"), MS))
    if not ok:
        return CapacityRow(**base, capacity=None)
    probes = sorted(per_run[0], key=lambda p: p.streams)
    at = next((p for p in probes if p.streams == found[0]), None)
    budget = max((p.streams for p in probes if p.streams * p.p99_ms <= chunk_s * MS), default=0)
    points = [(p.streams, p.memory_bytes) for probes in per_run for p in probes if p.memory_bytes is not None]
    marginal = marginal_bytes(points)
    states = [v for m in ok for v in (m.extra.get("state_bytes") or {}).values()]
    lone = next((p for p in probes if p.streams == 1), None)
    busiest = max((p for p in probes if p.passed), key=lambda p: p.streams, default=None)
    ratio = (lone.compute_p50_ms / busiest.compute_p50_ms
             if lone and busiest and busiest.streams > 1 and busiest.compute_p50_ms else None)
    return CapacityRow(**base, capacity=statistics.median(found), probes=probes, budget=budget,
                       delay_p99_ms=None if at is None else at.delay_p99_ms, state_kb=_scaled(_median(states), 1 / KB),
                       marginal_mb=_scaled(marginal, 1 / MB), lone_ratio=ratio)


def _offline(runs: Sequence[Measurement]) -> Tuple[Optional[float], Optional[Tuple[float, float]]]:
    values = [m.audio_seconds / w for m in runs if m.ok and m.audio_seconds for w in m.wall_s if w > 0]
    if not values:
        return None, None
    return statistics.median(values), (min(values), max(values))


def analyse(results: Results) -> StreamSummary:
    """The one analysis of a stream job's results (see the module docstring); a broken record is refused first."""
    for m in results.records:
        check_stream_record(m)
    settings: Dict[Tuple[str, int], Dict[str, Any]] = {}
    for runs in group_runs(results.records).values():
        rep = representative(runs)
        s = settings.setdefault(rep.cell.setting, {"rows": [], "capacities": [], "offline": None, "loads": []})
        s["loads"] += [m.extra["loadavg_1m"] for m in runs if m.extra.get("loadavg_1m") is not None]
        kind = _params(rep)[0]
        if kind == "latency":
            s["rows"].append(_latency_row(runs))
        elif kind == "capacity":
            s["capacities"].append(_capacity_row(runs))
        elif kind == "offline":
            s["offline"] = (rep,) + _offline(runs)
    out = []
    for (device, threads), s in sorted(settings.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
        rows = sorted(s["rows"], key=lambda r: (r.chunk_size, r.left_context == -1, r.left_context, r.streams))
        offline, rtfx, spread = s["offline"] or (None, None, None)
        loads = (min(s["loads"]), max(s["loads"])) if s["loads"] else None
        groups: Dict[Tuple[int, int], List[Tuple[int, float]]] = {}
        for r in rows:
            if r.memory_reading_bytes is not None:
                groups.setdefault((r.chunk_size, r.left_context), []).append((r.streams, r.memory_reading_bytes))
        marginal = {k: v / MB for k, pts in groups.items() if (v := marginal_bytes(pts)) is not None}
        caps = sorted(s["capacities"], key=lambda c: (c.chunk_size, c.left_context == -1, c.left_context))
        out.append(StreamSetting(device, threads, rows, caps, offline, rtfx, loads, spread, marginal))
    model = next(iter(results.models), results.records[0].cell.model if results.records else "")
    return StreamSummary(model=model, rules=dict(results.rules), machine=dict(results.machine), settings=out)
