"""Live streams served by one process: chunks arrive at the pace of the audio and wait in one queue.

The model of a streaming server that every cell and every capacity probe of
the stream job measures:

- each of ``n`` streams sends the same utterance, cut into chunks of the
  model's chunk size (the last one short and unpadded), then the zero chunks
  that flush the feature extractor, as ``transcribe_file`` does;
- stream ``i`` starts ``i / n`` of a chunk after stream 0 (independent
  callers, evenly spread), so chunk ``k`` of stream ``i`` is complete, and
  *arrives*, at ``i * D / n + min((k + 1) * D, utterance)``, ``D`` the chunk
  duration; the flush chunks arrive with the utterance's last sample;
- one server loop takes chunks in order of arrival (round robin over the
  streams), waits (sleeps) until a chunk has arrived, and calls the model's
  ``transcribe_chunk`` on it with that stream's own context: when compute
  falls behind, chunks queue. Each call is timed by an outside clock;
- a session whose next chunk has waited more than ``max_backlog_s`` stops
  there: the server cannot keep up, and more audio would only lengthen the
  queue (and the run). The chunks left are counted, not served.

So a chunk's *delay*, from its arrival to its output, is its wait in the
queue plus its compute. :func:`schedule` is the pure part (what arrives
when), :func:`serve` runs it against a clock.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional


@dataclass(frozen=True)
class Chunk:
    """One chunk of one stream: samples ``[first, first + length)`` of the utterance (``length`` 0: a flush chunk
    of zeros), complete at ``arrival_s`` after the session's start."""

    stream: int
    index: int
    first: int
    length: int
    arrival_s: float


def schedule(n_samples: int, chunk_samples: int, flush_chunks: int, streams: int, sample_rate: int) -> List[Chunk]:
    """Every chunk of every stream in the order the server takes them (arrival, then stream, then index).

    Example
    -------
    >>> [(c.stream, c.index, c.length, c.arrival_s) for c in schedule(250, 100, 1, 2, 100)]  # doctest: +NORMALIZE_WHITESPACE
    [(0, 0, 100, 1.0), (1, 0, 100, 1.5), (0, 1, 100, 2.0), (0, 2, 50, 2.5), (0, 3, 0, 2.5), (1, 1, 100, 2.5),
     (1, 2, 50, 3.0), (1, 3, 0, 3.0)]
    """
    chunk_s = chunk_samples / sample_rate
    out: List[Chunk] = []
    for stream in range(streams):
        offset = stream * chunk_s / streams
        starts = list(range(0, n_samples, chunk_samples))
        for index, first in enumerate(starts):
            length = min(chunk_samples, n_samples - first)
            out.append(Chunk(stream, index, first, length, offset + (first + length) / sample_rate))
        end = offset + n_samples / sample_rate
        out += [Chunk(stream, len(starts) + j, n_samples, 0, end) for j in range(flush_chunks)]
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
    tokens: List[Optional[int]] = field(default_factory=list)
    memory_bytes: List[Optional[int]] = field(default_factory=list)
    texts: Dict[int, str] = field(default_factory=dict)
    unserved: int = 0

    @property
    def compute_s(self) -> List[float]:
        """Each chunk's compute time: the outside clock around ``transcribe_chunk``."""
        return [e - s for s, e in zip(self.start_s, self.end_s)]

    def columns(self) -> Dict[str, List[Any]]:
        """The per-chunk columns as a record's ``extra["chunks"]`` keeps them."""
        return {k: getattr(self, k) for k in ("stream", "index", "samples", "arrival_s", "start_s", "end_s",
                                              "tokens", "memory_bytes")}


def serve(chunks: List[Chunk], transcribe: Callable[[int, int, int], Any], *, max_backlog_s: Optional[float] = None,
          tokens: Callable[[], Optional[int]] = lambda: None, memory: Callable[[], Optional[int]] = lambda: None,
          clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep) -> Served:
    """Run the server loop over ``chunks`` (from :func:`schedule`) in real time.

    ``transcribe(stream, first, length)`` feeds one chunk to its stream's
    context and returns the text it emitted (``length`` 0: a flush chunk); it
    is the only thing inside the clock. ``tokens()`` and ``memory()`` are read
    right after each call (the tokens the call emitted, memory in use). The
    session stops before a chunk that has waited more than ``max_backlog_s``.

    Example
    -------
    >>> served = serve(schedule(200, 100, 0, 1, 1000), lambda s, f, n: "a")
    >>> served.texts, [round(a, 3) for a in served.arrival_s], all(s >= a for s, a in zip(served.start_s, served.arrival_s))
    ({0: 'aa'}, [0.1, 0.2], True)
    """
    out = Served()
    start = clock()
    for done, chunk in enumerate(chunks):
        wait = start + chunk.arrival_s - clock()
        if max_backlog_s is not None and -wait > max_backlog_s:
            out.unserved = len(chunks) - done
            break
        if wait > 0:
            sleep(wait)
        t0 = clock()
        text = transcribe(chunk.stream, chunk.first, chunk.length)
        t1 = clock()
        out.stream.append(chunk.stream)
        out.index.append(chunk.index)
        out.samples.append(chunk.length)
        out.arrival_s.append(chunk.arrival_s)
        out.start_s.append(t0 - start)
        out.end_s.append(t1 - start)
        out.tokens.append(tokens())
        out.memory_bytes.append(memory())
        out.texts[chunk.stream] = out.texts.get(chunk.stream, "") + (text or "")
    return out
