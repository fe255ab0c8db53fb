"""A stream job's results analysed once: per cell the latency figures, per setting the capacities and offline RTFx.

Every figure comes from the per-chunk columns a cell's record keeps
(``extra["chunks"]``: session, chunk index, samples, arrival, start and end
of each chunk, the process's and the serving thread's CPU time, tokens,
memory on CUDA; times in seconds after the session's start), pooled over a
cell's runs. The
definitions, which the report prints beside its tables:

- compute latency: the outside clock around one ``transcribe_chunk`` call,
  every chunk the server processed (flush chunks included);
- delay: a chunk's output time minus the arrival of its last sample (queue +
  compute), over the chunks that hold audio (flush chunks: see final result).
  *Steady*: every chunk but a session's last; *end of utterance*: the chunk
  holding a session's last sample;
- delay growth: the least-squares slope of delay against arrival time (seconds
  of delay per second); *behind* (the backlog grows) when it exceeds
  :data:`~sbprof.analysis.stream_criterion.BEHIND_SLOPE`, or when chunks were left unserved;
- capacity criterion (:func:`~sbprof.analysis.stream_criterion.within_target`): nothing unserved, p99 delay
  within the target (default one chunk duration) and not behind;
- compute budget of a cell: chunk duration / (streams x p99 compute) >= 1;
  every chunk costing the p99 with no overlap: a bound below the capacity,
  not a verdict (:func:`~sbprof.analysis.stream_criterion.budget_margin`); a capacity search's worst-case
  compute budget, streams per machine with its range, memory per added stream and the server's own time per
  chunk are defined in :mod:`~sbprof.analysis.stream_capacity`;
- algorithmic latency: chunk duration + the feature extractor's look-ahead;
- first token: output of a session's first chunk that emitted a token minus
  the speech onset (the first 10 ms frame within 30 dB of the loudest);
- final result: output of a session's last (flush) chunk minus the arrival of the utterance's last sample;
- streaming RTF: compute / seconds of audio served; utilisation: compute / the session's length;
- CPU cost: the process's CPU time during a full chunk's call / the chunk's seconds of audio (core-seconds per
  second of audio), median over full chunks with a ~95 % interval (:func:`cpu_cost`);
- state per stream: the bytes of a session's streaming-context tensors after its last chunk, held (whole
  storages: what the stream costs in memory) and addressed (what its tensors span:
  :func:`~sbprof.models.streaming.context_state`);
- memory per added stream: the least-squares slope, with its 95 % interval, of what each cell (or capacity
  probe) added to the process's memory, over stream counts (the cells of one chunk size and left context, or the
  probes), from at least three counts, or not given;
- cost growth: median compute of the last third of a session's full chunks over that of the first third
  (chunk 0 left out); about 1 when the left context is bounded;
- emission latency (given a reference alignment): the output of the chunk that emitted token k minus the
  reference end of unit k (sessions that start with the utterance).

Pure: no torch, no clocks. This module builds the summary (:func:`analyse`) from the modules beside it:
:mod:`~sbprof.analysis.stream_validation` refuses a hand-edited record before anything reads it,
:mod:`~sbprof.analysis.stream_criterion` holds the capacity criterion (shared with the worker),
:mod:`~sbprof.analysis.stream_sessions` the per-session figures and :mod:`~sbprof.analysis.stream_summary` the
:class:`~sbprof.analysis.stream_summary.StreamSummary` that the renderers (:mod:`sbprof.report.stream`) format.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.figures import Outcome
from sbprof.analysis.stream_capacity import capacity_row, memory_slope
from sbprof.analysis.stream_criterion import (audio_rows, budget_margin, median_interval, quantile_interval,
                                              utilisation, within_target)
from sbprof.analysis.stream_payload import payload
from sbprof.analysis.stream_limits import stream_limits
from sbprof.analysis.stream_sessions import cost_growth, session_times, split_delays
from sbprof.analysis.machine_facts import results_facts
from sbprof.analysis.stream_summary import LatencyRow, StreamRules, StreamSetting, StreamSummary
from sbprof.analysis.stream_validation import check_stream_record
from sbprof.record import Measurement
from sbprof.record.codec import from_json
from sbprof.record.results import Results
from sbprof.analysis.runs import group_runs, representative
from sbprof.base.stats import quantile

MS = 1e3
MB = 1e6
KB = 1e3
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


# -- per cell -----------------------------------------------------------------------------------------------------

def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _scaled(value: Optional[float], factor: float) -> Optional[float]:
    return None if value is None else value * factor


def cpu_cost(chunks: Dict[str, List[Any]], chunk_samples: int, sample_rate: int) -> List[float]:
    """Each full chunk's CPU time over its seconds of audio (chunks without a CPU time left out).

    Example
    -------
    >>> cpu_cost({"samples": [100, 100, 50, 0], "cpu_s": [0.05, None, 0.02, 0.01]}, 100, 1000)
    [0.5]
    """
    chunk_s = chunk_samples / sample_rate
    cpu = chunks.get("cpu_s") or [None] * len(chunks["samples"])
    return [c / chunk_s for n, c in zip(chunks["samples"], cpu) if n == chunk_samples and c is not None]


def _params(m: Measurement) -> Tuple[str, int, int]:
    p = m.cell.params
    return str(p.get("kind")), int(p.get("chunk_size") or 0), int(p.get("left_context_chunks") or 0)


def _latency_row(runs: Sequence[Measurement]) -> LatencyRow:
    rep = representative(runs)
    kind, chunk_size, left = _params(rep)
    streams = int(rep.cell.params.get("streams", 1))
    ok = [(m, payload(m)) for m in runs if m.ok and m.wall_s]
    extra = payload(rep)
    base = dict(outcome=Outcome.of(rep), chunk_size=chunk_size, left_context=left, streams=streams, runs=len(ok),
                traffic=extra.traffic or "aligned")
    if not ok:
        return LatencyRow(**base)
    rate, samples = int(extra.sample_rate), int(extra.chunk_samples)
    utterance = int(rep.settings.get("utterance_samples") or samples)
    compute = [s for m, _ in ok for s in m.wall_s]
    steady, end, delays, times, verdicts, utils = [], [], [], [], [], []
    audio_s = tokens_total = audio_chunks = 0.0
    for m, p in ok:
        cols = p.chunks
        s_, e_ = split_delays(cols, utterance, samples)
        steady += s_
        end += e_
        delays += [cols["end_s"][i] - cols["arrival_s"][i] for i in audio_rows(cols)]
        times.append(session_times(cols, rate, float(p.speech_onset_s or 0.0), p.reference_ends_s))
        verdicts.append(within_target(cols, samples / rate, p.unserved_chunks))
        utils.append(utilisation(cols))
        audio_s += sum(cols["samples"]) / rate
        audio_chunks += len(audio_rows(cols))
        tokens_total += sum(t for t in cols["tokens"] if t is not None)
    costs = [c for _, p in ok for c in cpu_cost(p.chunks, samples, rate)]
    right = extra.right_context_samples
    chunk_s = samples / rate
    mem = [m.memory for m, _ in ok if m.memory is not None]
    cuda = rep.cell.device.startswith("cuda")
    peak = _median([x.peak_cuda_bytes if cuda else x.peak_rss_bytes for x in mem])
    added = _median([x.peak_cuda_delta_bytes if cuda else x.peak_rss_delta_bytes for x in mem])
    states = [v for _, p in ok for v in p.state_bytes.values()]
    views = [v for _, p in ok for v in p.state_view_bytes.values()]
    emission = [e for t in times for e in t.emission_s]
    any_tokens = any(t is not None for _, p in ok for t in p.chunks["tokens"])
    slopes = [v.slope for v in verdicts if v.slope is not None]
    delay_ms = {k: quantile(steady or delays, q) * MS for k, q in PERCENTILES} if (steady or delays) else {}
    algorithmic_ms = None if right is None else (samples + right) / rate * MS
    return LatencyRow(
        **base, chunk_ms=chunk_s * MS, chunks=len(compute),
        compute_ms={**{k: quantile(compute, q) * MS for k, q in PERCENTILES}, "max": max(compute) * MS},
        p99_interval_ms=tuple(x * MS if isinstance(x, float) else x for x in quantile_interval(compute, 0.99)),
        margin=budget_margin(compute, streams, chunk_s),
        algorithmic_ms=algorithmic_ms, delay_ms=delay_ms,
        felt_ms=None if algorithmic_ms is None or not delay_ms else algorithmic_ms + delay_ms["p99"],
        end_delay_ms={k: quantile(end, q) * MS for k, q in (("p50", 0.5), ("p99", 0.99))} if end else {},
        delay_growth=_median(slopes), behind=any(v.behind for v in verdicts),
        first_token_ms=_scaled(_median([t for s in times for t in s.first_token_s]), MS),
        final_ms=_scaled(_median([t for s in times for t in s.final_s]), MS),
        tokens_per_chunk=tokens_total / audio_chunks if any_tokens and audio_chunks else None,
        tokens_per_audio_s=tokens_total / audio_s if any_tokens and audio_s else None,
        growth=_median([cost_growth(p.chunks, m.wall_s, samples) for m, p in ok]),
        streaming_rtf=sum(compute) / audio_s if audio_s else None, utilisation=_median(utils),
        cpu_cost=median_interval(costs) if costs else None,
        state_kb=_scaled(_median(states), 1 / KB), state_view_kb=_scaled(_median(views), 1 / KB),
        process_peak_mb=_scaled(peak, 1 / MB), memory_bytes=added,
        emission_ms={k: quantile(emission, q) * MS for k, q in (("p50", 0.5), ("p99", 0.99))} if emission else {},
        emission_tokens=len(emission),
        unserved=sum(p.unserved_chunks for _, p in ok),
        compute_sorted_ms=sorted(s * MS for s in compute), delay_sorted_ms=sorted(d * MS for d in delays))


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
        s["loads"] += [load for m in runs for load in [payload(m).loadavg_1m] if load is not None]
        kind = _params(rep)[0]
        if kind == "latency":
            s["rows"].append(_latency_row(runs))
        elif kind == "capacity":
            s["capacities"].append(capacity_row(runs, _params(rep)))
        elif kind == "offline":
            s["offline"] = (Outcome.of(rep),) + _offline(runs)
    out = []
    for (device, threads), s in sorted(settings.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
        rows = sorted(s["rows"], key=lambda r: (r.chunk_size, r.left_context == -1, r.left_context, r.streams))
        offline, rtfx, spread = s["offline"] or (None, None, None)
        loads = (min(s["loads"]), max(s["loads"])) if s["loads"] else None
        groups: Dict[Tuple[int, int], List[Tuple[int, float]]] = {}
        for r in rows:
            if r.memory_bytes is not None:
                groups.setdefault((r.chunk_size, r.left_context), []).append((r.streams, r.memory_bytes))
        slopes = {k: memory_slope(pts) for k, pts in groups.items() if len({n for n, _ in pts}) > 1}
        caps = sorted(s["capacities"], key=lambda c: (c.chunk_size, c.left_context == -1, c.left_context))
        out.append(StreamSetting(device, threads, rows, caps, offline, rtfx, loads, spread,
                                 {k: tuple(x / MB for x in v) for k, (v, _) in slopes.items() if v is not None},
                                 {k: why for k, (_, why) in slopes.items() if why is not None}))
    model = next(iter(results.models), results.records[0].cell.model if results.records else "")
    loads = [s.loads for s in out if s.loads]
    return StreamSummary(model=model, rules=from_json(StreamRules, dict(results.rules), "rules"),
                         machine=results_facts(results), settings=out,
                         loads=(min(lo for lo, _ in loads), max(hi for _, hi in loads)) if loads else None,
                         limits=stream_limits(results.records, out))
