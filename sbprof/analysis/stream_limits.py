"""What limits a streaming model here: the stream job's verdicts (:mod:`sbprof.analysis.limits`).

- **streams per machine**, one verdict per capacity search: the streams one
  process serves within the delay target, or that even one stream misses it;
  figures: the capacity (the range repeated probes at the boundary gave, and
  over runs), the target, the p99 delay at that count (the median over its
  probes, from the lowest to the highest bound of their ~95 %
  order-statistics intervals), the server's busy share there and how long
  its thread waited for a core there (the load the capacity was found under).
- **decoder**: a chunk's ``decode_chunk`` time against its ``encode_chunk``
  time (medians over the chunks of every latency cell and capacity probe of
  one setting, chunk size and left context, each with a ~95 % interval for
  the median). It fires where the decoder's median passes the encoder's and
  the two intervals do not overlap (overlapping: not decided, said so); the
  report names the configuration where the decoder's share is largest.
  Results written before the split was recorded get no decoder verdict.

Pure: no torch, no clocks.

Example
-------
>>> cols = {"encode_s": [0.01] * 30, "decode_s": [0.03] * 30}
>>> (v,), undecided = decoder_limit({("cpu", 1, 8, 2): [cols]})
>>> print(v.sentence)  # doctest: +NORMALIZE_WHITESPACE
On cpu, 1 thread(s), chunk size 8, left context 2: the decoder takes 3.00x the encoder per chunk
(30.0 ms against 10.0 ms).
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.limits import Figure, Limits, Verdict, decoder, limits, streams_per_machine
from sbprof.analysis.stream_criterion import median_interval
from sbprof.analysis.stream_payload import Columns, payload
from sbprof.analysis.stream_summary import CapacityRow, StreamSetting
from sbprof.record import Measurement

Group = Tuple[str, int, int, int]
"""(device, threads, chunk size, left context)."""

NO_SPLIT = ("decoder: the chunks hold no encode/decode split (results written before it was recorded, or a model "
            "whose transcribe_chunk does not call encode_chunk and decode_chunk)")


def _where(group: Group) -> str:
    device, threads, chunk, left = group
    return f"{device}, {threads} thread(s), chunk size {chunk}, left context {'unlimited' if left == -1 else left}"


def chunk_columns(m: Measurement) -> List[Columns]:
    """Every set of per-chunk columns a record keeps: a latency cell's, or each capacity probe's."""
    extra = payload(m)
    return ([extra.chunks] if extra.chunks else []) + [p.chunks for p in extra.probes]


def decoder_limit(groups: Dict[Group, List[Columns]]) -> Tuple[List[Verdict], List[str]]:
    """The decoder verdict (where its share is largest) over configurations' per-chunk columns, and what could not
    be decided."""
    fired: List[Verdict] = []
    undecided: List[str] = []
    split = 0
    for group, columns in sorted(groups.items()):
        pairs = [(e, d) for cols in columns for e, d in zip(cols.get("encode_s", []), cols.get("decode_s", []))
                 if e is not None and d is not None]
        if not pairs:
            continue
        split += 1
        dec, enc = median_interval([d for _, d in pairs]), median_interval([e for e, _ in pairs])
        verdict = decoder(dec[0], enc[0])
        if verdict is None:
            continue
        if dec[1] <= enc[2]:
            undecided.append(f"decoder on {_where(group)}: the decoder's median ({dec[0] * 1e3:.3g} ms) passes the "
                             f"encoder's ({enc[0] * 1e3:.3g} ms) but their intervals overlap over {len(pairs)} chunks")
            continue
        figures = [Figure("decode per chunk", dec[0], "s", dec[1], dec[2]),
                   Figure("encode per chunk", enc[0], "s", enc[1], enc[2]),
                   Figure("decode / encode", dec[0] / enc[0], "", dec[1] / enc[2], dec[2] / enc[1]),
                   Figure("chunks", len(pairs), "")]
        sentence = f"On {_where(group)}: {verdict.sentence[0].lower()}{verdict.sentence[1:]}"
        fired.append(replace(verdict, sentence=sentence, figures=figures))
    if not split:
        return [], [NO_SPLIT] if groups else []
    if not fired:
        return [], undecided
    best = max(fired, key=lambda v: v.weight)
    if len(fired) > 1:
        best = replace(best, sentence=best.sentence[:-1] + f"; it passes the encoder in {len(fired)} of {split} "
                       "configurations.")
    return [best], undecided


def capacity_limit(setting: StreamSetting, row: CapacityRow) -> Tuple[Optional[Verdict], Optional[str]]:
    """The streams-per-machine verdict of one capacity search, or why there is none."""
    where = f"{setting.device}, {setting.threads} thread(s)"
    if row.capacity is None or row.target_ms is None or not row.found:
        return None, f"streams per machine on {where}: the capacity search measured nothing ({row.outcome.status})"
    n = max(1, row.found[0])
    at = [p for p in row.probes if p.streams == n]  # the first run's probes at its capacity
    delay = None if row.delay_p99_ms is None else row.delay_p99_ms / 1e3
    busy = [p.utilisation for p in at if p.utilisation is not None]
    span = None if row.capacity_low is None else (row.capacity_low, row.capacity_high)
    verdict = streams_per_machine(row.capacity, row.target_ms / 1e3, delay, where,
                                  statistics.median(busy) if busy else None,
                                  at_limit=row.capacity >= row.max_streams > 0, span=span)
    figures = list(verdict.figures)
    if row.waited_share is not None:  # how much load there was where the boundary was found
        figures.append(Figure("server's wait for a core at capacity", row.waited_share, "share"))
    intervals = [p.delay_p99_interval_ms for p in at if p.delay_p99_interval_ms is not None]
    if delay is not None:  # the median over the probes at that count, from their lowest to highest interval bound
        figures[2] = replace(figures[2], name=f"p99 delay at {n} stream(s)",
                             low=min(i[0] for i in intervals) / 1e3 if intervals else None,
                             high=max(i[1] for i in intervals) / 1e3 if intervals else None)
    return replace(verdict, figures=figures), None


def stream_limits(records: Sequence[Measurement], settings: Sequence[StreamSetting]) -> Limits:
    """The stream job's "What limits this" (see the module docstring)."""
    candidates: List[Optional[Verdict]] = []
    undecided: List[str] = []
    for s in settings:
        for row in s.capacities:
            verdict, why = capacity_limit(s, row)
            candidates.append(verdict)
            undecided += [why] if why else []
    if not any(s.capacities for s in settings):
        undecided.append("streams per machine: no capacity search in these results (`capacity:` in the config)")
    groups: Dict[Group, List[Columns]] = {}
    for m in records:
        p = m.cell.params
        if m.ok and p.get("kind") in ("latency", "capacity"):
            key = (m.cell.device, m.cell.threads, int(p.get("chunk_size") or 0), int(p.get("left_context_chunks") or 0))
            groups.setdefault(key, []).extend(chunk_columns(m))
    verdicts, why = decoder_limit(groups)
    return limits(candidates + list(verdicts), undecided + why)

