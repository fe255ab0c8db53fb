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
    """What one session recorded, one entry per chunk in processing order (times in seconds after the start)."""

    stream: List[int] = field(default_factory=list)
    index: List[int] = field(default_factory=list)
    samples: List[int] = field(default_factory=list)
    arrival_s: List[float] = field(default_factory=list)
    start_s: List[float] = field(default_factory=list)
    end_s: List[float] = field(default_factory=list)
    cpu_s: List[Optional[float]] = field(default_factory=list)
    waited_s: List[Optional[float]] = field(default_factory=list)
    tokens: List[Optional[int]] = field(default_factory=list)
    memory_bytes: List[Optional[int]] = field(default_factory=list)
    encode_s: List[Optional[float]] = field(default_factory=list)
    decode_s: List[Optional[float]] = field(default_factory=list)
    texts: Dict[int, str] = field(default_factory=dict)
    state_bytes: Dict[int, int] = field(default_factory=dict)
    unserved: int = 0

    COLUMNS = ("stream", "index", "samples", "arrival_s", "start_s", "end_s", "cpu_s", "waited_s", "tokens",
               "memory_bytes", "encode_s", "decode_s")

    @property
    def compute_s(self) -> List[float]:
        """Each chunk's compute time: the outside clock around ``transcribe_chunk``."""
        return [e - s for s, e in zip(self.start_s, self.end_s)]

    def columns(self) -> Dict[str, List[Any]]:
        """The per-chunk columns as a record's ``extra["chunks"]`` keeps them."""
        return {k: getattr(self, k) for k in self.COLUMNS}


def _runqueue_s() -> Optional[float]:
    """Seconds this thread has waited for a core since it started (``/proc/thread-self/schedstat``), or ``None``."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def serve(chunks: List[Chunk], transcribe: Callable[[int, int, int], Any], *, max_backlog_s: Optional[float] = None,
          tokens: Callable[[], Optional[int]] = lambda: None, memory: Callable[[], Optional[int]] = lambda: None,
          close: Callable[[int], Optional[int]] = lambda stream: None,
          stages: Callable[[], Tuple[Optional[float], Optional[float]]] = lambda: (None, None),
          clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep) -> Served:
    """Run the server loop over ``chunks`` (from :func:`schedule`) in real time.

    ``transcribe(stream, first, length)`` feeds one chunk to its session's
    context and returns the text it emitted (``length`` 0: a flush chunk); it
    is the only thing inside the clock. ``tokens()`` and ``memory()`` are read
    right after each call (the tokens the call emitted, memory in use), and so
    is ``stages()``: the seconds the call spent encoding and decoding
    (``None`` where the model does not split them); beside each call, the
    process's CPU time and the time this thread waited for a core (``None``
    where the system does not say). ``close(stream)`` is called after a
    session's last chunk (outside the clock): the bytes of state it held, or
    ``None``. The session stops before a chunk that has waited more than
    ``max_backlog_s``.

    Example
    -------
    >>> served = serve(schedule(200, 100, 0, 1, 1000), lambda s, f, n: "a")
    >>> served.texts, [round(a, 3) for a in served.arrival_s], all(s >= a for s, a in zip(served.start_s, served.arrival_s))
    ({0: 'aa'}, [0.1, 0.2], True)
    """
    last: Dict[int, int] = {c.stream: i for i, c in enumerate(chunks)}
    out = Served()
    start = clock()
    for done, chunk in enumerate(chunks):
        wait = start + chunk.arrival_s - clock()
        if max_backlog_s is not None and -wait > max_backlog_s:
            out.unserved = len(chunks) - done
            break
        if wait > 0:
            sleep(wait)
        queue0, cpu0 = _runqueue_s(), time.process_time()
        t0 = clock()
        text = transcribe(chunk.stream, chunk.first, chunk.length)
        t1 = clock()
        cpu1, queue1 = time.process_time(), _runqueue_s()
        out.stream.append(chunk.stream)
        out.index.append(chunk.index)
        out.samples.append(chunk.length)
        out.arrival_s.append(chunk.arrival_s)
        out.start_s.append(t0 - start)
        out.end_s.append(t1 - start)
        out.cpu_s.append(cpu1 - cpu0)
        out.waited_s.append(None if queue0 is None or queue1 is None else queue1 - queue0)
        out.tokens.append(tokens())
        out.memory_bytes.append(memory())
        encode, decode = stages()
        out.encode_s.append(encode)
        out.decode_s.append(decode)
        out.texts[chunk.stream] = out.texts.get(chunk.stream, "") + (text or "")
        if last[chunk.stream] == done:
            state = close(chunk.stream)
            if state is not None:
                out.state_bytes[chunk.stream] = state
    return out
