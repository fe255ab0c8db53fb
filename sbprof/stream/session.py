"""Live streams served by one process: chunks arrive at the pace of the audio and wait in one queue.

The model of a streaming server that every cell and every capacity probe of
the stream job measures. ``n`` streams are live at once; each sends the
utterance cut into chunks of the model's chunk size (the last one short and
unpadded), then the zero chunks that flush the feature extractor, as
``transcribe_file`` does. One *session* is one utterance of one stream, with
its own streaming context. How the sessions are laid out in time is the
``traffic`` (``D`` the chunk duration, ``U`` the utterance, ``M`` its
chunks; the window lasts ``U + (n - 1) D / n``):

- ``spread`` (the default): stream ``i`` starts ``i / n`` of a chunk after
  stream 0 (the chunks of the streams interleave evenly), and is
  ``k_i = floor(i M / n)`` chunks into its utterance when the window opens
  (that first session feeds chunks ``k_i ...`` to a fresh context); when its
  utterance ends, the stream's next utterance starts at once, until the
  window ends (a session still running then is cut: it has no end). So
  ``n`` streams are live all the time and the streams' ends are spread over
  the utterance, one at a time, as on a server whose callers started at
  unrelated times;
- ``poisson``: the ``n`` sessions live at the start are as random (each at a
  random point of its utterance, at a random phase within a chunk), and new
  sessions arrive at random, a Poisson process of rate ``n / U`` (so ``n``
  are live on average), each sending the whole utterance;
- ``aligned``: every stream sends the utterance once, stream ``i`` starting
  ``i / n`` of a chunk after stream 0: every stream's last chunk and flush
  arrive in the same chunk period (a worst case: the end burst).

A chunk *arrives* when its last sample would have been spoken (the flush
chunks with the utterance's last sample). One server loop takes chunks in
order of arrival, waits (sleeps) until a chunk has arrived, and calls the
model's ``transcribe_chunk`` on it with its session's context: when compute
falls behind, chunks queue. Each call is timed by an outside clock. A
session whose next chunk has waited more than ``max_backlog_s`` stops there:
the server cannot keep up, and more audio would only lengthen the queue (and
the run). The chunks left are counted, not served.

So a chunk's *delay*, from its arrival to its output, is its wait in the
queue plus its compute. :func:`schedule` is the pure part (what arrives
when), :func:`serve` runs it against a clock.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from sbprof.measuring.counters import core_wait

TRAFFIC = ("spread", "poisson", "aligned")
"""The session layouts :func:`schedule` knows (see the module docstring)."""


@dataclass(frozen=True)
class Chunk:
    """One chunk of one session: samples ``[first, first + length)`` of the utterance (``length`` 0: a flush chunk
    of zeros), chunk ``index`` of the utterance, complete at ``arrival_s`` after the session's start."""

    stream: int
    index: int
    first: int
    length: int
    arrival_s: float


def _session(out: List[Chunk], session: int, start_s: float, skip: int, n_samples: int, chunk_samples: int,
             flush_chunks: int, sample_rate: int, until_s: float) -> float:
    """Append one session's chunks (from chunk ``skip`` of the utterance, starting at ``start_s``) that arrive by
    ``until_s``; return when its last sample arrives."""
    origin = start_s - skip * chunk_samples / sample_rate
    starts = list(range(0, n_samples, chunk_samples))
    for index in range(skip, len(starts)):
        first = starts[index]
        length = min(chunk_samples, n_samples - first)
        arrival = origin + (first + length) / sample_rate
        if arrival > until_s + 1e-9:
            return origin + n_samples / sample_rate
        out.append(Chunk(session, index, first, length, arrival))
    end = origin + n_samples / sample_rate
    if end <= until_s + 1e-9:
        out += [Chunk(session, len(starts) + j, n_samples, 0, end) for j in range(flush_chunks)]
    return end


def schedule(n_samples: int, chunk_samples: int, flush_chunks: int, streams: int, sample_rate: int,
             traffic: str = "aligned", seed: int = 0) -> List[Chunk]:
    """Every chunk of every session in the order the server takes them (arrival, then session, then index).

    ``stream`` numbers the sessions: ``0 ... n - 1`` the streams' first ones (stream 0's is the whole utterance),
    then the later ones (see the module docstring).

    Example
    -------
    >>> [(c.stream, c.index, c.length, c.arrival_s) for c in schedule(250, 100, 1, 2, 100)]  # doctest: +NORMALIZE_WHITESPACE
    [(0, 0, 100, 1.0), (1, 0, 100, 1.5), (0, 1, 100, 2.0), (0, 2, 50, 2.5), (0, 3, 0, 2.5), (1, 1, 100, 2.5),
     (1, 2, 50, 3.0), (1, 3, 0, 3.0)]
    >>> [(c.stream, c.index, c.arrival_s) for c in schedule(400, 100, 0, 2, 100, "spread")]  # doctest: +NORMALIZE_WHITESPACE
    [(0, 0, 1.0), (1, 2, 1.5), (0, 1, 2.0), (1, 3, 2.5), (0, 2, 3.0), (2, 0, 3.5), (0, 3, 4.0), (2, 1, 4.5)]
    """
    if traffic not in TRAFFIC:
        raise ValueError(f"traffic must be one of {', '.join(TRAFFIC)}, got {traffic!r}")
    chunk_s = chunk_samples / sample_rate
    utterance_s = n_samples / sample_rate
    m = math.ceil(n_samples / chunk_samples)
    out: List[Chunk] = []
    if traffic == "aligned":
        for stream in range(streams):
            _session(out, stream, stream * chunk_s / streams, 0, n_samples, chunk_samples, flush_chunks, sample_rate,
                     math.inf)
    else:
        window = utterance_s + (streams - 1) * chunk_s / streams
        rng = random.Random(seed * 1000003 + streams)
        later = streams
        for stream in range(streams):
            if traffic == "spread" or stream == 0:
                offset, skip = stream * chunk_s / streams, (stream * m) // streams
            else:  # at a random point of its utterance: as much of it already spoken
                spoken = rng.uniform(0, utterance_s)
                skip = min(m - 1, int(spoken // chunk_s))
                offset = skip * chunk_s - spoken
            end = _session(out, stream, offset, skip, n_samples, chunk_samples, flush_chunks, sample_rate, window)
            while traffic == "spread" and end < window:
                before = len(out)
                end = _session(out, later, end, 0, n_samples, chunk_samples, flush_chunks, sample_rate, window)
                later += len(out) > before
        if traffic == "poisson":
            t = 0.0
            while True:
                t += rng.expovariate(streams / utterance_s)
                if t + chunk_s > window:
                    break
                _session(out, later, t, 0, n_samples, chunk_samples, flush_chunks, sample_rate, window)
                later += 1
    return sorted(out, key=lambda c: (c.arrival_s, c.stream, c.index))


@dataclass
class Served:
    """What one session recorded, one entry per chunk in processing order (times in seconds after the start).

    ``cpu_s``: the process's CPU time during the call (every thread); ``thread_cpu_s``: the serving thread's own
    (the call's wall time minus it is the time that thread was off a core: waiting for one, or blocked);
    ``memory_bytes``: the CUDA allocator's allocation after the call (``None`` on a CPU, whose memory is read once
    per session as its peak: a ``/proc`` read costs tens of µs after a call). Per session: ``state_bytes`` (the
    storages its context's tensors keep alive) and ``state_view_bytes`` (the elements those tensors address),
    ``core_wait_s``, how long the serving thread waited for a core over the whole session (``None`` where the
    system does not say), and ``unserved`` chunks.
    """

    stream: List[int] = field(default_factory=list)
    index: List[int] = field(default_factory=list)
    samples: List[int] = field(default_factory=list)
    arrival_s: List[float] = field(default_factory=list)
    start_s: List[float] = field(default_factory=list)
    end_s: List[float] = field(default_factory=list)
    cpu_s: List[Optional[float]] = field(default_factory=list)
    thread_cpu_s: List[Optional[float]] = field(default_factory=list)
    tokens: List[Optional[int]] = field(default_factory=list)
    memory_bytes: List[Optional[int]] = field(default_factory=list)
    encode_s: List[Optional[float]] = field(default_factory=list)
    decode_s: List[Optional[float]] = field(default_factory=list)
    texts: Dict[int, str] = field(default_factory=dict)
    state_bytes: Dict[int, int] = field(default_factory=dict)
    state_view_bytes: Dict[int, int] = field(default_factory=dict)
    core_wait_s: Optional[float] = None
    unserved: int = 0

    COLUMNS = ("stream", "index", "samples", "arrival_s", "start_s", "end_s", "cpu_s", "thread_cpu_s", "tokens",
               "memory_bytes", "encode_s", "decode_s")

    @property
    def compute_s(self) -> List[float]:
        """Each chunk's compute time: the outside clock around ``transcribe_chunk``."""
        return [e - s for s, e in zip(self.start_s, self.end_s)]

    def columns(self) -> Dict[str, List[Any]]:
        """The per-chunk columns as a record's ``extra["chunks"]`` keeps them."""
        return {k: getattr(self, k) for k in self.COLUMNS}


State = Optional[Tuple[int, int]]
"""What ``close`` gives for a session: (bytes of storage its context keeps alive, bytes its tensors address)."""


def serve(chunks: List[Chunk], transcribe: Callable[[int, int, int], Any], *, max_backlog_s: Optional[float] = None,
          tokens: Callable[[], Optional[int]] = lambda: None, memory: Callable[[], Optional[int]] = lambda: None,
          close: Callable[[int], State] = lambda stream: None,
          stages: Callable[[], Tuple[Optional[float], Optional[float]]] = lambda: (None, None),
          clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep) -> Served:
    """Run the server loop over ``chunks`` (from :func:`schedule`) in real time.

    ``transcribe(stream, first, length)`` feeds one chunk to its session's
    context and returns the text it emitted (``length`` 0: a flush chunk); it
    is the only thing inside the clock. ``tokens()``, ``memory()`` and
    ``stages()`` are read right after each call (the tokens the call emitted;
    memory in use, or ``None``; the seconds it spent encoding and decoding,
    ``None`` where the model does not split them); beside each call, the
    process's and the serving thread's CPU time. ``close(stream)`` is called
    after a session's last chunk (outside the clock): the bytes of state it
    held (see :data:`State`), or ``None``. The session stops before a chunk
    that has waited more than ``max_backlog_s``.

    Between two calls the loop reads two CPU clocks and appends one row (no
    ``/proc`` file: the first one read after a model's call costs about 35 µs
    here): what it spends there is busy time a real server would not spend,
    measured against an outside loop by ``benchmarks/stream_overhead.py``.

    Example
    -------
    >>> served = serve(schedule(200, 100, 0, 1, 1000), lambda s, f, n: "a")
    >>> served.texts, [round(a, 3) for a in served.arrival_s], all(s >= a for s, a in zip(served.start_s, served.arrival_s))
    ({0: 'aa'}, [0.1, 0.2], True)
    """
    with core_wait() as waited:  # opened in the serving thread: its wait for a core, read at both ends only
        before = waited.read()
        out = _serve(chunks, transcribe, max_backlog_s, tokens, memory, close, stages, clock, sleep)
        after = waited.read()
    out.core_wait_s = None if before is None or after is None else after - before
    return out


def _serve(chunks: List[Chunk], transcribe: Callable[[int, int, int], Any], max_backlog_s: Optional[float],
           tokens: Callable[[], Optional[int]], memory: Callable[[], Optional[int]], close: Callable[[int], State],
           stages: Callable[[], Tuple[Optional[float], Optional[float]]], clock: Callable[[], float],
           sleep: Callable[[float], None]) -> Served:
    """:func:`serve`'s loop: one row per chunk, turned into columns once the session is over."""
    last: Dict[int, int] = {c.stream: i for i, c in enumerate(chunks)}
    out = Served()
    rows: List[Tuple[Any, ...]] = []
    process, thread = time.process_time, time.thread_time
    start = clock()
    for done, chunk in enumerate(chunks):
        wait = start + chunk.arrival_s - clock()
        if max_backlog_s is not None and -wait > max_backlog_s:
            out.unserved = len(chunks) - done
            break
        if wait > 0:
            sleep(wait)
        cpu0, own0 = process(), thread()
        t0 = clock()
        text = transcribe(chunk.stream, chunk.first, chunk.length)
        t1 = clock()
        own1, cpu1 = thread(), process()
        rows.append((chunk, t0 - start, t1 - start, cpu1 - cpu0, own1 - own0, tokens(), memory(), stages()))
        if text:
            out.texts[chunk.stream] = out.texts.get(chunk.stream, "") + text
        if last[chunk.stream] == done:
            state = close(chunk.stream)
            if state is not None:
                out.state_bytes[chunk.stream], out.state_view_bytes[chunk.stream] = state
    for chunk, t0, t1, cpu, own, emitted, used, (encode, decode) in rows:
        for name, value in (("stream", chunk.stream), ("index", chunk.index), ("samples", chunk.length),
                            ("arrival_s", chunk.arrival_s), ("start_s", t0), ("end_s", t1), ("cpu_s", cpu),
                            ("thread_cpu_s", own), ("tokens", emitted), ("memory_bytes", used),
                            ("encode_s", encode), ("decode_s", decode)):
            getattr(out, name).append(value)
    return out
