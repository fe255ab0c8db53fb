"""The checks a stream record read from ``results.json`` passes before any figure is read from it.

:func:`check_stream_record` refuses a hand-edited or damaged record (a field's type, length or range), naming
the record and the field in one line.
"""
from __future__ import annotations

import math
from typing import Any

from sbprof.base.errors import ConfigError
from sbprof.record import Measurement

CHUNK_COLUMNS = ("stream", "index", "samples", "arrival_s", "start_s", "end_s", "tokens", "memory_bytes")
"""The per-chunk columns every stream record keeps (``cpu_s``, ``encode_s`` and ``decode_s`` too since they were
added; ``waited_s`` until issue 44, ``thread_cpu_s`` since)."""


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
    for name in ("tokens", "memory_bytes", "cpu_s", "waited_s", "thread_cpu_s", "encode_s", "decode_s"):
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
    sbprof.base.errors.ConfigError: results.json: record 'chunk 8' (run 0): extra.chunks must be a mapping of per-chunk lists, got str 'garbage'; ...
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
        for name in ("peak_bytes", "peak_delta_bytes", "core_wait_s"):
            if p.get(name) is not None and not (_is_number(p[name]) and p[name] >= 0):
                raise _bad(m, f"{where}.{name}", f"must be null or a number >= 0, got {p[name]!r:.40}")
    if not _is_number(m.extra.get("target_s")) or m.extra["target_s"] <= 0:
        raise _bad(m, "extra.target_s", f"must be a positive number of seconds, got {m.extra.get('target_s')!r}")
