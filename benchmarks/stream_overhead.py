"""What the stream job's simulated server costs per chunk, beside an outside loop over the same chunks.

A capacity probe serves chunks one after another; whatever the server does
between two ``transcribe_chunk`` calls (reading clocks, the thread's wait for
a core, memory, tokens, its lists) is busy time a real server would not
spend, so it lowers the streams per machine found. This benchmark builds the
stream job's own worker in this process (:class:`sbprof.stream.worker.StreamWorker`:
its model with the token counter and stage timer wrapped in, its feeder, its
memory reader) and runs :func:`sbprof.stream.session.serve` over one probe's
chunks, every chunk arrived at the start (a backlogged server: it never
sleeps), beside an outside loop written here over the same chunks on a
second, unwrapped copy of the model (a clock read before and after each call,
one append). Two models:

- ``no-op``: ``transcribe_chunk`` replaced by a function that does nothing:
  the loop's own cost per chunk, all of it bookkeeping;
- ``streaming_asr``: sbprof's local streaming Conformer transducer (chunk 8,
  left context 2), whose calls leave the caches cold for what follows them.

Per chunk: ``gap``, the median time from one call's end to the next one's
start (the loop's own work); ``outside_calls``, the loop's wall time minus
its calls' over the chunks (the gap's mean: a garbage collection or a
preemption that lands between two calls counts here, though the first would
have run inside the model's next call anyway); ``compute``, the median call
(whether the bookkeeping slows the calls themselves), and, beside a third
loop that reads the thread's CPU clock around each call as sbprof does and
nothing else, the call's median CPU time (which other processes' load moves
far less than its wall time). Rounds run the three loops in turn (which goes
first rotates); printed: per figure the median over rounds and the ratio
sbprof / outside.

Run: ``python benchmarks/stream_overhead.py [--rounds 7] [--streams 8]``
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import torch

from sbprof.models.source import LoadedModel
from sbprof.stream.config import load_config
from sbprof.stream.session import Chunk, schedule, serve
from sbprof.stream.worker import StreamWorker

CHUNK, LEFT = 8, 2


def build_worker(folder: Path) -> StreamWorker:
    """The stream job's worker on the local model, set up as a worker process would be (one thread)."""
    path = folder / "stream.yaml"
    path.write_text("model: {source: streaming_asr, type: StreamingASR}\n"
                    f"streaming: {{chunk_sizes: [{CHUNK}], left_context_chunks: [{LEFT}], audio_s: 4.0}}\n"
                    f"devices: cpu\ncpu_threads: 1\nwarmup: 2\noutput_folder: {folder / 'out'}\n")
    cfg = load_config(path)
    worker = StreamWorker({"config": cfg.to_dict(), "device": "cpu", "threads": 1})
    worker.setup()
    return worker


def backlogged(worker: StreamWorker, streams: int) -> Tuple[Any, int, List[Chunk]]:
    """One probe's chunks (spread traffic), every one of them arrived at the start."""
    config, samples, flush = worker.dyn_config(CHUNK, LEFT)
    chunks = schedule(worker.wav.shape[0], samples, flush, streams, worker.rate, traffic="spread")
    return config, samples, [dataclasses.replace(c, arrival_s=0.0) for c in chunks]


Loop = Tuple[float, List[Tuple[float, float]], List[float]]
"""A loop's wall time, each call's (start, end), and each call's CPU time on the serving thread (or none)."""


def sbprof_loop(worker: StreamWorker, streams: int, noop: bool) -> Loop:
    """``serve`` with the worker's own feeder and readers, as on a CPU."""
    config, samples, chunks = backlogged(worker, streams)
    transcribe, close = worker.feeder(config, samples, sorted({c.stream for c in chunks}))
    call = (lambda stream, first, length: "") if noop else transcribe
    t0 = time.perf_counter()
    served = serve(chunks, call, tokens=worker.tokens.take, close=close, stages=worker.stages.take)
    return time.perf_counter() - t0, list(zip(served.start_s, served.end_s)), served.thread_cpu_s


def outside_loop(worker: StreamWorker, model: Any, streams: int, noop: bool, cpu: bool = False) -> Loop:
    """The same chunks through a loop written here, on an unwrapped copy of the model: a clock around each call
    (``cpu``: the thread's CPU clock too, the two reads sbprof makes around a call, and nothing else)."""
    config, samples, chunks = backlogged(worker, streams)
    wav, zeros = worker.wav, torch.zeros(1, samples)
    pieces = {(f, min(samples, wav.shape[0] - f)): wav[f:f + samples].unsqueeze(0) for f in range(0, wav.shape[0],
                                                                                                  samples)}
    contexts = {c.stream: model.make_streaming_context(config) for c in chunks}
    call: Callable[[Any, Any], Any] = (lambda context, x: None) if noop else model.transcribe_chunk
    times: List[Tuple[float, float]] = []
    own: List[float] = []
    clock = time.thread_time if cpu else (lambda: 0.0)
    start = t0 = time.perf_counter()
    for c in chunks:
        if start + c.arrival_s > time.perf_counter():  # the same pacing test as a paced loop makes
            time.sleep(start + c.arrival_s - time.perf_counter())
        c0 = clock()
        a = time.perf_counter()
        call(contexts[c.stream], pieces[(c.first, c.length)] if c.length else zeros)
        b = time.perf_counter()
        own.append(clock() - c0)
        times.append((a, b))
    return time.perf_counter() - t0, times, own if cpu else []


def figures(wall: float, calls: List[Tuple[float, float]], own: List[float]) -> Dict[str, float]:
    """Per chunk: the median gap between one call's end and the next one's start (the loop's own time; robust to
    a preemption or a garbage collection landing there), the mean of everything outside the calls, the median
    call, and its median CPU time on the serving thread (where read)."""
    gaps = [b[0] - a[1] for a, b in zip(calls, calls[1:])]
    out = {"gap_us": statistics.median(gaps) * 1e6, "outside_calls_us": (wall - sum(e - s for s, e in calls))
           / len(calls) * 1e6, "compute_ms": statistics.median(e - s for s, e in calls) * 1e3}
    return {**out, "compute_cpu_ms": statistics.median(own) * 1e3} if own else out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--streams", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        worker = build_worker(Path(tmp))
        plain = LoadedModel(worker.cfg.model, "cpu", worker.cfg.preamble.seed, str(Path(tmp) / "dl")).model
        for noop in (True, False):
            name = "no-op" if noop else f"streaming_asr (chunk {CHUNK}, left {LEFT})"
            arms = {"sbprof": lambda: sbprof_loop(worker, args.streams, noop),
                    "outside": lambda: outside_loop(worker, plain, args.streams, noop),
                    "outside_cpu": lambda: outside_loop(worker, plain, args.streams, noop, cpu=True)}
            rows: Dict[str, List[Dict[str, float]]] = {arm: [] for arm in arms}
            for arm in arms.values():
                arm()  # warm every arm before anything is kept
            order = list(arms)
            for r in range(args.rounds):
                for arm in order[r % 3:] + order[:r % 3]:  # which goes first rotates
                    rows[arm].append(figures(*arms[arm]()))
            print(f"{name}, {args.streams} streams backlogged, {args.rounds} rounds (median over rounds):")
            for figure, unit, other in (("gap_us", "us per chunk", "outside"),
                                        ("outside_calls_us", "us per chunk", "outside"),
                                        ("compute_ms", "ms per call", "outside"),
                                        ("compute_cpu_ms", "ms per call (CPU)", "outside_cpu")):
                if noop and figure.startswith("compute"):
                    continue
                s = statistics.median(x[figure] for x in rows["sbprof"])
                o = statistics.median(x[figure] for x in rows[other])
                print(f"  {figure.rsplit('_', 1)[0]:14s} sbprof {s:9.3f}  {other:11s} {o:9.3f} {unit}  "
                      f"ratio {s / o:.2f}")


if __name__ == "__main__":
    main()
