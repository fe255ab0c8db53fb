"""What a stream worker saves in a record's ``extra``, typed: a latency cell's, a capacity search's, an offline call's.

``results.json`` keeps its shape; :func:`payload` reads it back (after
:func:`~sbprof.analysis.stream_validation.check_stream_record` refused a
hand-edited record with a precise message). The per-chunk columns stay
columns (``{"stream": [...], "arrival_s": [...], ...}``): the capacity
criterion (:mod:`sbprof.analysis.stream_criterion`) reads that same form in
the worker while it searches.

Example
-------
>>> from sbprof.record import Measurement
>>> p = payload(Measurement("c", extra={"sample_rate": 16000, "chunk_samples": 1280, "state_bytes": {"0": 512}}))
>>> p.chunk_s, p.state_bytes, p.unserved_chunks, p.traffic
(0.08, {'0': 512}, 0, None)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from sbprof.record import Measurement
from sbprof.record.codec import Codec, from_json
from sbprof.record.payload import Payload

Columns = Dict[str, List[Any]]
"""Per-chunk columns: one list per field (``stream``, ``samples``, ``arrival_s``, ``start_s``, ``end_s``...)."""


@dataclass(frozen=True)
class ProbeRecord(Codec):
    """One probe of a capacity search: its stream count, its chunks, the chunks it left unserved; since issue 44,
    the memory peak over it and its growth over the memory in use before it (bytes; ``None`` where not read) and
    how long the serving thread waited for a core during it (s)."""

    streams: int
    chunks: Columns
    unserved_chunks: int = 0
    peak_bytes: Optional[float] = None
    peak_delta_bytes: Optional[float] = None
    core_wait_s: Optional[float] = None


@dataclass(frozen=True)
class StreamPayload(Payload):
    """A stream record's ``extra`` (each key optional: an offline record holds only the load); the worker writes
    it with ``to_dict()``, which keeps only the keys it set."""

    sample_rate: Optional[int] = None
    chunk_samples: Optional[int] = None
    chunks: Optional[Columns] = None
    traffic: Optional[str] = None
    speech_onset_s: Optional[float] = None
    reference_ends_s: Optional[List[float]] = None
    unserved_chunks: int = 0
    right_context_samples: Optional[int] = None
    state_bytes: Dict[str, float] = field(default_factory=dict)
    state_view_bytes: Dict[str, float] = field(default_factory=dict)
    core_wait_s: Optional[float] = None
    probes: List[ProbeRecord] = field(default_factory=list)
    target_s: Optional[float] = None
    loadavg_1m: Optional[float] = None
    flush_chunks: Optional[int] = None  # zero chunks fed after the audio to flush the feature extractor
    max_backlog_s: Optional[float] = None  # the backlog at which a session stopped (None: never)
    transcript: Optional[str] = None  # the first session's text, kept to be read by a person
    capacity: Optional[int] = None  # a capacity search's streams served within the target (None: not even 1)
    cuda_initialized: Optional[bool] = None  # whether the worker ever paid for a CUDA context

    @property
    def chunk_s(self) -> float:
        """Seconds of audio per chunk."""
        return self.chunk_samples / self.sample_rate


def payload(m: Measurement) -> StreamPayload:
    """The record's ``extra``, typed."""
    return from_json(StreamPayload, m.extra, f"record {m.label!r}: extra")
