"""The worker of one stream-job setting: ``python -m sbprof.stream.worker`` (see :mod:`sbprof.workers.cells`).

A fresh process per (device, thread count) and run loads the model once
(:class:`~sbprof.models.source.LoadedModel`), checks that it can stream and
that every chunk size and left context asked for is one it was trained for
(bad input otherwise), builds the utterance, then measures each item by its
cell's ``kind``:

- ``latency``: ``warmup`` chunks on a throw-away stream, then ``measured``
  sessions of ``streams`` live streams (:mod:`sbprof.stream.session`): every
  chunk's compute time (outside clock around ``transcribe_chunk``), its
  ``encode_chunk`` and ``decode_chunk`` times (:class:`StageTimer`), arrival,
  output, CPU times, tokens (and memory on CUDA), each session's state and its
  thread's wait for a core, and the process's memory peak over the cell;
- ``offline``: the whole utterance in one ``transcribe_chunk`` call (one chunk
  spanning it: full attention, as an offline transcription), for its RTFx;
- ``capacity``: sessions of more and more streams, bisected, then the counts
  at the boundary probed again (:mod:`sbprof.stream.capacity`), on the delay
  criterion (:func:`sbprof.analysis.stream_criterion.within_target`), each
  probe's per-chunk columns kept with its memory peak and its thread's wait
  for a core.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from sbprof.analysis.stream_payload import ProbeRecord, StreamPayload
from sbprof.analysis.stream_criterion import capacity_estimate, capacity_range, within_target
from sbprof.models.audio import load_example, make_batch
from sbprof.measuring.env import collect_env, load_average
from sbprof.base.errors import BackendUnavailable, ConfigError
from sbprof.measuring.memory import CpuPeak, CudaPeak, release_memory
from sbprof.models.source import LoadedModel
from sbprof.models.streaming import (UNLIMITED, check_allowed, check_streaming_model, chunk_samples, context_state,
                                     final_chunks, right_context_samples, trained_ranges)
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.stream.capacity import next_probe
from sbprof.stream.config import StreamConfig
from sbprof.stream.session import Served, State, schedule, serve
from sbprof.measuring.timing import measure
from sbprof.workers.cells import CellWorker, SetupError, serve_cells
from sbprof.workers.protocol import one_line

OFFLINE_CALLS = 5
"""Timed offline calls per run (after one unmeasured call): the offline RTFx is their median, beside their range."""
ONSET_DB = 30.0
"""The speech onset: the first 10 ms frame whose RMS is within this many dB of the loudest frame's."""


def speech_onset_s(wav: Any, rate: int) -> float:
    """Seconds from the utterance's start to its speech onset (see :data:`ONSET_DB`)."""
    frame = max(1, rate // 100)
    n = wav.shape[0] // frame
    if n == 0:
        return 0.0
    rms = wav[:n * frame].reshape(n, frame).float().pow(2).mean(dim=1).sqrt()
    loud = float(rms.max())
    if loud <= 0:
        return 0.0
    above = (rms >= loud * 10 ** (-ONSET_DB / 20)).nonzero()
    return float(above[0, 0]) * frame / rate if above.numel() else 0.0


class TokenCounter:
    """Counts the tokens each ``transcribe_chunk`` emits, by wrapping the model's ``decode_chunk`` (which
    ``transcribe_chunk`` calls); ``None`` for a model whose chunk call does not go through it."""

    def __init__(self, model: Any):
        self.last: Optional[int] = None
        original = getattr(model, "decode_chunk", None)
        if callable(original):
            def counted(context: Any, x: Any) -> Any:
                words, tokens = original(context, x)
                self.last = sum(len(t) for t in tokens)
                return words, tokens

            model.decode_chunk = counted

    def take(self) -> Optional[int]:
        value, self.last = self.last, None
        return value


class StageTimer:
    """Times each ``transcribe_chunk``'s two stages, ``encode_chunk`` then ``decode_chunk`` (SpeechBrain's
    ``StreamingASR`` calls them in turn), by wrapping them on the model: the wall clock around each call, the device
    synchronised after it on CUDA (otherwise the encoder's kernels would be paid for in the decoder's first wait).
    ``take()`` gives the last call's ``(encode_s, decode_s)``; ``None`` for a stage the model does not call."""

    def __init__(self, model: Any, sync: Callable[[], None] = lambda: None):
        self.encode_chunk: Optional[float] = None
        self.decode_chunk: Optional[float] = None
        for name in ("encode_chunk", "decode_chunk"):
            original = getattr(model, name, None)
            if callable(original):
                setattr(model, name, self._timed(name, original, sync))

    def _timed(self, name: str, original: Callable[..., Any], sync: Callable[[], None]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = original(*args, **kwargs)
            sync()
            setattr(self, name, time.perf_counter() - t0)
            return out

        return timed

    def take(self) -> Tuple[Optional[float], Optional[float]]:
        value = (self.encode_chunk, self.decode_chunk)
        self.encode_chunk = self.decode_chunk = None
        return value


def load_streaming_model(cfg: StreamConfig, device: str) -> LoadedModel:
    """The model on ``device``; a model without the streaming hyperparameters is bad input."""
    src = cfg.model
    try:
        loaded = LoadedModel(src, device, cfg.preamble.seed, cfg.preamble.output_folder)
    except ValueError as exc:
        if "Need hparams[" in str(exc) or "Need modules[" in str(exc):
            raise ConfigError(f"model {src.name!r} has no streaming hyperparameters ({one_line(exc)}): "
                              f"{src.type} needs fea_streaming_extractor, make_decoder_streaming_context, "
                              "decoding_function, make_tokenizer_streaming_context, tokenizer_decode_streaming "
                              "and the modules enc and proj_enc") from None
        raise SetupError(f"could not load model {src.name!r} ({src.type}) on {device}: {one_line(exc)}") from None
    except Exception as exc:  # anything: the run says why, once per batch
        raise SetupError(f"could not load model {src.name!r} ({src.type}) on {device}: {one_line(exc)}") from None
    check_streaming_model(loaded.model, src.name)
    return loaded


class StreamWorker(CellWorker):
    """Measures the latency, offline and capacity items of one setting (see the module docstring)."""

    def setup(self) -> Dict[str, Any]:
        self.cfg = StreamConfig.from_dict(self.job["config"])
        self.device = self.job["device"]
        torch.manual_seed(self.cfg.preamble.seed)
        collect_env()  # its one-off cost (a git call, file reads) stays out of the first cell
        t0 = time.perf_counter()
        loaded = load_streaming_model(self.cfg, self.device)
        self.asr, self.rate = loaded.model, loaded.sample_rate
        s, cap = self.cfg.streaming, self.cfg.capacity
        ranges = trained_ranges(self.asr.hparams)
        check_allowed(ranges, self.cfg.model.name, s.chunk_sizes, s.left_context_chunks)
        if cap is not None:
            check_allowed(ranges, self.cfg.model.name, cap.chunk_size, cap.left_context_chunks,
                          chunk_key="capacity.chunk_size", left_key="capacity.left_context_chunks")
        example = load_example(s.audio, self.rate) if s.audio else None
        self.wav = (example if s.audio_s is None else
                    make_batch(s.audio_s, 1, self.rate, seed=self.cfg.preamble.seed, example=example).wavs[0])
        self.onset_s = speech_onset_s(self.wav, self.rate)
        cuda = self.device.startswith("cuda")
        self.stages = StageTimer(self.asr, (lambda: torch.cuda.synchronize(self.device)) if cuda else (lambda: None))
        self.tokens = TokenCounter(self.asr)  # outside the stage timer: counting is not the decoder's time
        return {"sample_rate": self.rate, "load_s": time.perf_counter() - t0}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        cell = Cell.from_dict(item["cell"])
        kind = cell.params["kind"]
        if kind == "offline":
            m, extra = self.offline(cell, item), StreamPayload()
        elif kind == "latency":
            m, extra = self.latency(cell, item)
        else:
            m, extra = self.search(cell, item)
        m.extra = replace(extra, loadavg_1m=load_average(), cuda_initialized=torch.cuda.is_initialized()).to_dict()
        return m.to_dict()

    # -- the chunk loop ---------------------------------------------------------------------------------------------

    def dyn_config(self, chunk_size: int, left: int) -> Tuple[Any, int, int]:
        """SpeechBrain's chunk config (-1: as many past chunks as a stream has), samples per chunk, flush chunks."""
        from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

        samples = chunk_samples(self.asr, chunk_size)
        flush = final_chunks(self.asr, samples)
        per_stream = math.ceil(self.wav.shape[0] / samples) + flush
        return DynChunkTrainConfig(chunk_size, per_stream if left == UNLIMITED else left), samples, flush

    def feeder(self, config: Any, samples: int, sessions: Any) -> Tuple[Callable[[int, int, int], str],
                                                                          Callable[[int], State]]:
        """``transcribe(stream, first, length)`` and ``close(stream)`` for :func:`~sbprof.stream.session.serve`:
        inputs and one streaming context per session made before (outside the clock); ``close`` measures the bytes
        of a session's context (held and addressed: :func:`~sbprof.models.streaming.context_state`) and lets it
        go."""
        wav = self.wav.to(self.device)
        zeros = torch.zeros(1, samples, device=self.device)
        pieces = {(first, min(samples, wav.shape[0] - first)): wav[first:first + samples].unsqueeze(0)
                  for first in range(0, wav.shape[0], samples)}  # made now, outside the clock
        contexts = {s: self.asr.make_streaming_context(config) for s in sessions}
        cuda = self.device.startswith("cuda")

        def transcribe(stream: int, first: int, length: int) -> str:
            words = self.asr.transcribe_chunk(contexts[stream], pieces[(first, length)] if length else zeros)
            if cuda:
                torch.cuda.synchronize(self.device)
            return words[0]

        def close(stream: int) -> Optional[Tuple[int, int]]:
            context = contexts.pop(stream, None)
            return None if context is None else context_state(context)

        return transcribe, close

    def warm(self, chunk_size: int, left: int) -> None:
        """``warmup`` chunks from the utterance's start on a throw-away stream, unmeasured."""
        config, samples, _ = self.dyn_config(chunk_size, left)
        (feed, _), n = self.feeder(config, samples, [0]), self.wav.shape[0]
        starts = range(0, n, samples)
        for k in range(self.cfg.preamble.warmup):
            first = starts[k % len(starts)]
            feed(0, first, min(samples, n - first))
        self.tokens.take()
        self.stages.take()

    def session(self, chunk_size: int, left: int, streams: int, passes: int) -> Tuple[Served, int, int]:
        """``passes`` real-time sessions of ``streams`` streams (each pass's streams numbered after the last)."""
        config, samples, flush = self.dyn_config(chunk_size, left)
        # After each chunk, the CUDA allocator's allocation (no system call); on a CPU the session's peak is read
        # around it instead (a /proc read after each call would cost the server tens of µs a chunk).
        memory = ((lambda: torch.cuda.memory_allocated(self.device)) if self.device.startswith("cuda")
                  else lambda: None)
        total = Served()
        offset = 0
        for p in range(passes):
            chunks = schedule(self.wav.shape[0], samples, flush, streams, self.rate,
                              traffic=self.cfg.streaming.traffic, seed=self.cfg.preamble.seed + p)
            sessions = sorted({c.stream for c in chunks})
            transcribe, close = self.feeder(config, samples, sessions)
            served = serve(chunks, transcribe, max_backlog_s=self.cfg.streaming.max_backlog_s,
                           tokens=self.tokens.take, memory=memory, close=close, stages=self.stages.take)
            total.unserved += served.unserved
            for name, values in served.columns().items():
                getattr(total, name).extend(v + offset if name == "stream" else v for v in values)
            total.texts.update({k + offset: v for k, v in served.texts.items()})
            total.state_bytes.update({k + offset: v for k, v in served.state_bytes.items()})
            total.state_view_bytes.update({k + offset: v for k, v in served.state_view_bytes.items()})
            if served.core_wait_s is not None:
                total.core_wait_s = (total.core_wait_s or 0.0) + served.core_wait_s
            offset += len(sessions)
        return total, samples, flush

    # -- the three kinds of item ---------------------------------------------------------------------------------

    def settings(self, item: Dict[str, Any], **more: Any) -> Dict[str, Any]:
        return dict(item.get("settings", {}), sample_rate=self.rate, utterance_samples=int(self.wav.shape[0]), **more)

    def latency(self, cell: Cell, item: Dict[str, Any]) -> Tuple[Measurement, StreamPayload]:
        p = cell.params
        cuda = self.device.startswith("cuda")
        tracker = CudaPeak(self.device) if cuda else CpuPeak()
        self.warm(p["chunk_size"], p["left_context_chunks"])
        release_memory(self.device)
        tracker.start()
        served, samples, flush = self.session(p["chunk_size"], p["left_context_chunks"], p["streams"],
                                              self.cfg.preamble.measured)
        peak = tracker.stop()
        memory = (MemoryPeak(peak_cuda_bytes=peak[0], peak_cuda_delta_bytes=peak[1], peak_cuda_reserved_bytes=peak[2])
                  if cuda else MemoryPeak(peak_rss_bytes=peak[0], peak_rss_delta_bytes=peak[1],
                                          rss_method=tracker.method, heap_trim=tracker.heap_trim))
        m = Measurement(label=item["label"], cell=cell, warmup=self.cfg.preamble.warmup, wall_s=served.compute_s,
                        audio_seconds=len(set(served.stream)) * self.wav.shape[0] / self.rate, memory=memory,
                        settings=self.settings(item), env=collect_env())
        return m, StreamPayload(
            chunks=served.columns(), chunk_samples=samples, sample_rate=self.rate, flush_chunks=flush,
            right_context_samples=right_context_samples(self.asr), unserved_chunks=served.unserved,
            max_backlog_s=self.cfg.streaming.max_backlog_s, traffic=self.cfg.streaming.traffic,
            speech_onset_s=self.onset_s, state_bytes={str(k): v for k, v in served.state_bytes.items()},
            state_view_bytes={str(k): v for k, v in served.state_view_bytes.items()}, core_wait_s=served.core_wait_s,
            reference_ends_s=(None if self.cfg.streaming.alignment is None else list(self.cfg.streaming.alignment)),
            transcript=served.texts.get(0, ""))

    def offline(self, cell: Cell, item: Dict[str, Any]) -> Measurement:
        from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

        frames = math.ceil(self.wav.shape[0] / chunk_samples(self.asr, 1))
        config = DynChunkTrainConfig(frames, 0)
        wav = self.wav.to(self.device).unsqueeze(0)

        def call() -> Any:
            return self.asr.transcribe_chunk(self.asr.make_streaming_context(config), wav)

        m = measure(call, warmup=1, repeats=OFFLINE_CALLS, max_repeats=OFFLINE_CALLS, device=self.device,
                    num_threads=self.job["threads"], label=item["label"])
        m.cell, m.audio_seconds = cell, self.wav.shape[0] / self.rate
        m.settings = self.settings(item, chunk_frames=frames)
        return m

    def probe_tracker(self) -> Optional[Any]:
        """A probe's memory peak: the CUDA allocator's, or the process's from the kernel's high-water mark, reset
        before it; ``None`` where the kernel cannot reset it (a sampling thread would compete with the server)."""
        if self.device.startswith("cuda"):
            return CudaPeak(self.device)
        try:
            return CpuPeak("clear_refs")
        except BackendUnavailable:
            return None

    def probe(self, p: Dict[str, Any], streams: int) -> Tuple[Served, Dict[str, Any]]:
        """One capacity probe of ``streams`` streams: its session, and what the record keeps of it."""
        self.warm(p["chunk_size"], p["left_context_chunks"])
        tracker = self.probe_tracker()
        if tracker is not None:
            tracker.start()  # hands freed memory back first: each probe's peak starts from the same floor
        served, _, _ = self.session(p["chunk_size"], p["left_context_chunks"], streams, 1)
        peak = tracker.stop() if tracker is not None else (None, None)
        return served, ProbeRecord(streams=streams, unserved_chunks=served.unserved, chunks=served.columns(),
                                   peak_bytes=peak[0], peak_delta_bytes=peak[1], core_wait_s=served.core_wait_s)

    def search(self, cell: Cell, item: Dict[str, Any]) -> Tuple[Measurement, StreamPayload]:
        p = cell.params
        outcomes: Dict[int, List[bool]] = {}
        probes: List[ProbeRecord] = []
        estimate: Optional[int] = None
        samples = chunk_samples(self.asr, p["chunk_size"])
        target_s = p["p99_delay_ms"] / 1e3 if p.get("p99_delay_ms") else samples / self.rate
        states: Dict[str, int] = {}
        views: Dict[str, int] = {}
        while True:
            # How often each count at the boundary is probed is the config's, not the cell's: a folder measured
            # before it existed resumes without measuring its searches again.
            n = next_probe(outcomes, estimate, p["max_streams"], self.cfg.capacity.boundary_probes)
            if n is None:
                break
            served, record = self.probe(p, n)
            outcomes.setdefault(n, []).append(within_target(record.chunks, target_s, served.unserved).passed)
            estimate = capacity_estimate(record.chunks, n)
            probes.append(record)
            key = f"{n}:{len(outcomes[n]) - 1}:"  # count, its probe, session
            states.update({key + str(k): v for k, v in served.state_bytes.items()})
            views.update({key + str(k): v for k, v in served.state_view_bytes.items()})
        found = capacity_range(outcomes)[0]
        best = next(pr for pr in probes if pr.streams == (found or 1))
        cols = best.chunks
        m = Measurement(label=item["label"], cell=cell, warmup=self.cfg.preamble.warmup,
                        wall_s=[e - s for s, e in zip(cols["start_s"], cols["end_s"])],
                        settings=self.settings(item), env=collect_env())
        return m, StreamPayload(probes=probes, capacity=found, chunk_samples=samples, sample_rate=self.rate,
                                target_s=target_s, state_bytes=states, state_view_bytes=views,
                                traffic=self.cfg.streaming.traffic)

    def release(self) -> None:
        release_memory(self.device)


if __name__ == "__main__":
    sys.exit(serve_cells(StreamWorker))
