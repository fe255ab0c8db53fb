"""A record read from a file, checked field by field before it becomes a :class:`~sbprof.record.Measurement`.

``results.json`` is a plain file that people edit, merge and copy between
machines. A field of the wrong type, length or range (a NaN peak, a sample
list one short) or a missing one would otherwise surface as a traceback deep
inside a renderer, or as a figure printed as "nan"; here it is one
:class:`~sbprof.base.errors.ConfigError` naming the field and what it holds.
:func:`check_fields` is the same check for any table of fields (a job's own
``extra`` block, for instance).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, Tuple

from sbprof.base.errors import ConfigError

STATUSES = ("ok", "skipped", "oom", "error")

Check = Callable[[Any], bool]
Fields = Dict[str, Tuple[Check, str]]
"""Field name -> (its check, what it must be in the message's words)."""


def number(v: Any) -> bool:
    """A finite number that is not a boolean (JSON's NaN and Infinity are refused)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def at_least(low: float) -> Check:
    """A finite number >= ``low``."""
    return lambda v: number(v) and v >= low


def samples(v: Any) -> bool:
    """A list of finite non-negative numbers."""
    return isinstance(v, list) and all(number(x) and x >= 0 for x in v)


def optional(check: Check) -> Check:
    """``None`` or what ``check`` accepts."""
    return lambda v: v is None or check(v)


def int_at_least(low: int) -> Check:
    """An integer (not a boolean) >= ``low``."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def mapping_of(check: Check) -> Check:
    """A mapping of texts to values that ``check`` accepts."""
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items())


_str: Check = lambda v: isinstance(v, str)  # noqa: E731 (a table of one-line checks reads best as lambdas)
_dict: Check = lambda v: isinstance(v, dict)  # noqa: E731
_plain: Check = lambda v: v is None or isinstance(v, (str, bool)) or number(v)  # noqa: E731

FIELDS: Fields = {
    "label": (_str, "a text"),
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "message": (_str, "a text"),
    "warmup": (int_at_least(0), "an integer >= 0"),
    "wall_s": (samples, "a list of non-negative numbers of seconds"),
    "cpu_s": (samples, "a list of non-negative numbers of seconds"),
    "cuda_s": (optional(samples), "null or a list of non-negative numbers of seconds"),
    "audio_seconds": (optional(lambda v: number(v) and v > 0), "null or a positive number of seconds"),
    "memory": (optional(_dict), "null or a mapping"),
    "counts": (optional(_dict), "null or a mapping"),
    "energy": (optional(_dict), "null or a mapping"),
    "settings": (_dict, "a mapping"),
    "env": (optional(_dict), "null or a mapping"),
    "extra": (_dict, "a mapping"),
}
"""Each field a record holds."""

CELL_FIELDS: Fields = {
    "model": (_str, "a text"),
    "variant": (optional(_str), "null or a text"),
    "device": (_str, "a device name"),
    "threads": (int_at_least(1), "an integer >= 1"),
    "audio_s": (optional(lambda v: number(v) and v > 0), "null or a positive number of seconds"),
    "batch_size": (optional(int_at_least(1)), "null or an integer >= 1"),
    "input": (_str, "a text"),
    "run": (int_at_least(0), "an integer >= 0"),
    "rank": (optional(int_at_least(0)), "null or an integer >= 0"),
    "params": (mapping_of(_plain), "a mapping of texts, numbers, booleans or nulls"),
}

_BYTES = (optional(int_at_least(0)), "null or a whole number of bytes >= 0")
_DELTA = (optional(lambda v: isinstance(v, int) and not isinstance(v, bool)), "null or a whole number of bytes")
_COUNT = (optional(at_least(0)), "null or a number >= 0")
PART_FIELDS: Dict[str, Fields] = {
    "memory": {"peak_rss_bytes": _BYTES, "peak_rss_delta_bytes": _DELTA,
               "rss_method": (optional(_str), "null or a text"), "heap_trim": (optional(_str), "null or a text"),
               "peak_cuda_bytes": _BYTES,
               "peak_cuda_delta_bytes": _DELTA, "peak_cuda_reserved_bytes": _BYTES},
    "counts": {"flops": _COUNT, "macs": _COUNT, "params": (optional(int_at_least(0)), "null or an integer >= 0"),
               "trainable_params": (optional(int_at_least(0)), "null or an integer >= 0")},
    "energy": {"duration_s": (at_least(0), "a number of seconds >= 0"), "start_unix_s": (number, "a number of seconds"),
               "end_unix_s": (number, "a number of seconds"),
               "joules": (mapping_of(at_least(0)), "a mapping of domains to joules >= 0"),
               "sources": (mapping_of(_str), "a mapping of domains to texts"),
               "unavailable": (mapping_of(_str), "a mapping of sources to texts"),
               "calls": (int_at_least(1), "an integer >= 1")},
    "env": {**{k: (_str, "a text") for k in ("python", "platform", "hostname", "cpu", "torch", "torchaudio",
                                             "speechbrain", "sbprof")},
            "cpu_count": (int_at_least(0), "an integer >= 0"), "llc_bytes": _BYTES,
            **{k: (optional(_str), "null or a text") for k in ("cuda", "gpu", "git_commit")}},
}
"""The fields of a record's parts (when the part is not null)."""

PART_REQUIRED = {"energy": ("duration_s", "start_unix_s", "end_unix_s")}
"""Fields a part cannot be built without."""


def check_fields(values: Mapping[str, Any], fields: Fields, where: str = "") -> None:
    """Refuse the first field of ``values`` that ``fields`` knows and whose value it does not accept.

    ``where`` prefixes the field's name in the message (``"cell."``).

    Example
    -------
    >>> check_fields({"chunks": [1, float("nan")]}, {"chunks": (samples, "a list of numbers >= 0")}, "extra.")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: field 'extra.chunks' must be a list of numbers >= 0, got [1, nan]
    """
    for name, (ok, what) in fields.items():
        if name in values and not ok(values[name]):
            raise ConfigError(f"field '{where}{name}' must be {what}, got {_short(values[name])}")


def check_record(d: Dict[str, Any], complete: bool = True) -> None:
    """Refuse a record dict with a field of the wrong type, length or range, or (``complete``) a missing field.

    ``complete=False`` is for a record migrated from an older version, whose
    writer did not have every field of today's.

    Example
    -------
    >>> check_record({"label": "c", "cell": {"model": "m"}, "wall_s": "0.1"})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: field 'wall_s' must be a list of non-negative numbers of seconds, got '0.1'
    >>> check_record({"label": "c"})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: no 'cell' (the record's coordinates)
    >>> check_record({"label": "c", "cell": {"model": "m"}, "wall_s": [0.1]})
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: no field 'status' (a record holds every field of this sbprof's records)
    """
    if not isinstance(d.get("cell"), dict):
        raise ConfigError("no 'cell' (the record's coordinates)" if "cell" not in d else
                          f"field 'cell' must be a mapping of coordinates, got {d['cell']!r}")
    check_fields(d, FIELDS)
    check_fields(d["cell"], CELL_FIELDS, "cell.")
    for part, fields in PART_FIELDS.items():
        if isinstance(d.get(part), dict):
            check_fields(d[part], fields, f"{part}.")
            missing = [k for k in PART_REQUIRED.get(part, ()) if k not in d[part]]
            if missing:
                raise ConfigError(f"no field '{part}.{missing[0]}' (the {part} block needs "
                                  f"{', '.join(PART_REQUIRED[part])})")
    wall = d.get("wall_s") or []
    for name in ("cpu_s", "cuda_s"):
        if d.get(name) and len(d[name]) != len(wall):
            raise ConfigError(f"field '{name}' must hold one sample per measured call, as 'wall_s' does: "
                              f"{len(d[name])} against {len(wall)}")
    if d.get("status", "ok") == "ok" and d.get("audio_seconds") is not None and not d.get("wall_s"):
        raise ConfigError("field 'wall_s' is empty in a measured record (status ok) that states its audio seconds")
    if complete:
        for where, fields, values in (("", FIELDS, d), ("cell.", CELL_FIELDS, d["cell"])):
            missing = [name for name in fields if name not in values]
            if missing:
                raise ConfigError(f"no field '{where}{missing[0]}' (a record holds every field of this "
                                  "sbprof's records)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
