"""A record read from a file, checked field by field before it becomes a :class:`~sbprof.record.Measurement`.

``results.json`` is a plain file that people edit, merge and copy between
machines. A field of the wrong type, length or range (a NaN peak, a sample
list one short, a negative audio second) or a missing one would otherwise
surface as a traceback deep inside a renderer, or as a figure printed as
"nan"; here it is one :class:`~sbprof.base.errors.ConfigError` naming the
field and what it holds. Ranges are checked for sense, not only type: seconds
at most :data:`MAX_SECONDS`, byte counts and sizes within 64 and 32 bits
(a 401-digit integer or 1e308 s would overflow the first sum or format), and
every number in a record's free-form blocks (``extra``, ``settings``) within
:data:`MAX_MAGNITUDE`. :func:`check_fields` is the same check for any table
of fields (a job's own ``extra`` block, for instance).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, Tuple

from sbprof.base.errors import ConfigError

STATUSES = ("ok", "skipped", "oom", "error")

Check = Callable[[Any], bool]
Fields = Dict[str, Tuple[Check, str]]
"""Field name -> (its check, what it must be in the message's words)."""


MAX_SECONDS = 1e9
"""Seconds a measured figure may hold (about 31 years): more is an edit or damage, never a measurement."""
MAX_BYTES = 2**63 - 1
"""A byte or operation count fits a signed 64-bit integer."""
MAX_SIZE = 2**31 - 1
"""Sizes and counts of things (threads, batch size, run, rank, warm-up calls), as the jobs cap them."""
MAX_MAGNITUDE = 1e30
"""Any number in a record's free-form blocks, and a FLOP or joule count: far above any real figure, far below
where sums overflow."""


def number(v: Any) -> bool:
    """A finite number that is not a boolean (JSON's NaN and Infinity are refused, and integers too large for a
    float, e.g. 401 digits).

    Example
    -------
    >>> number(3), number(float("nan")), number(10 ** 400), number(True)
    (True, False, False, False)
    """
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def at_least(low: float, high: float = MAX_MAGNITUDE) -> Check:
    """A finite number in [``low``, ``high``]."""
    return lambda v: number(v) and low <= v <= high


def samples(v: Any) -> bool:
    """A list of finite numbers of seconds in [0, :data:`MAX_SECONDS`]."""
    return isinstance(v, list) and all(number(x) and 0 <= x <= MAX_SECONDS for x in v)


def list_of(check: Check) -> Check:
    """A list whose items ``check`` accepts."""
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def optional(check: Check) -> Check:
    """``None`` or what ``check`` accepts."""
    return lambda v: v is None or check(v)


def int_at_least(low: int, high: int = MAX_SIZE) -> Check:
    """An integer (not a boolean) in [``low``, ``high``]."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def mapping_of(check: Check) -> Check:
    """A mapping of texts to values that ``check`` accepts."""
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items())


_str: Check = lambda v: isinstance(v, str)  # noqa: E731 (a table of one-line checks reads best as lambdas)
_dict: Check = lambda v: isinstance(v, dict)  # noqa: E731
_plain: Check = lambda v: v is None or isinstance(v, (str, bool)) or number(v)  # noqa: E731

_SECONDS = "numbers of seconds from 0 to 1e9"  # said once: 'non-negative' would repeat it
_POSITIVE_SECONDS = (optional(lambda v: number(v) and 0 < v <= MAX_SECONDS),
                     "null or a positive number of seconds, at most 1e9")

FIELDS: Fields = {
    "label": (_str, "a text"),
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "message": (_str, "a text"),
    "warmup": (int_at_least(0), "an integer from 0 to 2^31-1"),
    "wall_s": (samples, f"a list of {_SECONDS}"),
    "cpu_s": (samples, f"a list of {_SECONDS}"),
    "cuda_s": (optional(samples), f"null or a list of {_SECONDS}"),
    "audio_seconds": _POSITIVE_SECONDS,
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
    "threads": (int_at_least(1), "an integer from 1 to 2^31-1"),
    "audio_s": _POSITIVE_SECONDS,
    "batch_size": (optional(int_at_least(1)), "null or an integer from 1 to 2^31-1"),
    "input": (_str, "a text"),
    "run": (int_at_least(0), "an integer from 0 to 2^31-1"),
    "rank": (optional(int_at_least(0)), "null or an integer from 0 to 2^31-1"),
    "params": (mapping_of(_plain), "a mapping of texts, numbers, booleans or nulls"),
}

_BYTES = (optional(int_at_least(0, MAX_BYTES)), "null or a whole number of bytes from 0 to 2^63-1")
_DELTA = (optional(int_at_least(-MAX_BYTES, MAX_BYTES)), "null or a whole number of bytes within +-(2^63-1)")
_COUNT = (optional(at_least(0)), "null or a number from 0 to 1e30")
_INT_COUNT = (optional(int_at_least(0, MAX_BYTES)), "null or an integer from 0 to 2^63-1")
PART_FIELDS: Dict[str, Fields] = {
    "memory": {"peak_rss_bytes": _BYTES, "peak_rss_delta_bytes": _DELTA,
               "rss_method": (optional(_str), "null or a text"), "heap_trim": (optional(_str), "null or a text"),
               "peak_cuda_bytes": _BYTES,
               "peak_cuda_delta_bytes": _DELTA, "peak_cuda_reserved_bytes": _BYTES},
    "counts": {"flops": _COUNT, "macs": _COUNT, "params": _INT_COUNT, "trainable_params": _INT_COUNT},
    "energy": {"duration_s": (at_least(0, MAX_SECONDS), "a number of seconds from 0 to 1e9"),
               "start_unix_s": (number, "a number of seconds"), "end_unix_s": (number, "a number of seconds"),
               "joules": (mapping_of(at_least(0)), "a mapping of domains to joules from 0 to 1e30"),
               "sources": (mapping_of(_str), "a mapping of domains to texts"),
               "unavailable": (mapping_of(_str), "a mapping of sources to texts"),
               "calls": (int_at_least(1, MAX_BYTES), "an integer from 1 to 2^63-1")},
    "env": {**{k: (_str, "a text") for k in ("python", "platform", "hostname", "cpu", "torch", "torchaudio",
                                             "speechbrain", "sbprof")},
            "cpu_count": (int_at_least(0), "an integer from 0 to 2^31-1"), "llc_bytes": _BYTES,
            **{k: (optional(_str), "null or a text") for k in ("cuda", "gpu", "git_commit")}},
}
"""The fields of a record's parts (when the part is not null)."""

_STEP_SECONDS = (list_of(lambda v: v is None or (number(v) and 0 <= v <= MAX_SECONDS)),
                 f"a list (one value per step) of null or {_SECONDS}")
_STEP_COUNTS = (list_of(lambda v: v is None or (number(v) and 0 <= v <= MAX_BYTES)),
                "a list (one value per step) of null or numbers from 0 to 2^63-1")
EXTRA_FIELDS: Fields = {
    **dict.fromkeys(("audio_s", "audio_s_per_step", "all_wall_s", "all_cpu_s", "data_wait_s", "forward_s",
                     "backward_s", "optimizer_s"), _STEP_SECONDS),
    **dict.fromkeys(("utterances", "utterances_per_step", "tokens_per_step"), _STEP_COUNTS),
    "max_backlog_s": (optional(at_least(0, MAX_SECONDS)), f"null or a number of {_SECONDS}"),
}
"""Per-step figures that jobs keep in ``extra`` (``sbprof run``'s steps, a training rank's batches, a stream's
backlog), where a negative value or one out of range would be rendered as it stands."""

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
    sbprof.base.errors.ConfigError: field 'wall_s' must be a list of numbers of seconds from 0 to 1e9, got '0.1'
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
    for block in ("extra", "settings"):
        if isinstance(d.get(block), dict):
            check_magnitudes(d[block], f"{block}.")
    if isinstance(d.get("extra"), dict):
        check_fields(d["extra"], EXTRA_FIELDS, "extra.")
    wall = d.get("wall_s") or []
    for name in ("cpu_s", "cuda_s"):
        if d.get(name) and "wall_s" not in d:  # named as missing, not met as a length mismatch
            raise ConfigError(f"no field 'wall_s' (the samples that '{name}' goes with)")
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


def check_magnitudes(block: Any, where: str) -> None:
    """Refuse a number anywhere inside ``block`` (nested mappings and lists) that is not finite or exceeds
    :data:`MAX_MAGNITUDE`, naming where it sits: figures out of any sense, which would overflow a sum or a
    format (1e308 s, a 401-digit count).

    Example
    -------
    >>> check_magnitudes({"chunks": {"end_s": [0.1, 1e308]}}, "extra.")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: field 'extra.chunks.end_s' holds 1e+308, out of any sense for a figure (at most 1e30 in size)
    """
    stack = [(block, where.rstrip("."))]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack += [(v, f"{path}.{k}") for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, path) for v in value]
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not (
                number(value) and abs(value) <= MAX_MAGNITUDE):
            shown = f"an integer of {len(str(abs(value)))} digits" if isinstance(value, int) else f"{value:g}"
            raise ConfigError(f"field '{path}' holds {shown}, out of any sense for a figure (at most 1e30 in size)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
