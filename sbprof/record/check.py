"""A record read from a file, checked field by field before it becomes a :class:`~sbprof.record.Measurement`.

``results.json`` is a plain file that people edit, merge and copy between
machines. A field of the wrong type would otherwise surface as a traceback
deep inside a renderer; here it is one :class:`~sbprof.errors.ConfigError`
naming the field and what it holds.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Tuple

from sbprof.errors import ConfigError

STATUSES = ("ok", "skipped", "oom", "error")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _samples(v: Any) -> bool:
    return isinstance(v, list) and all(_number(x) and x >= 0 for x in v)


def _opt(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


_str = lambda v: isinstance(v, str)  # noqa: E731 (a table of one-line checks reads best as lambdas)
_dict = lambda v: isinstance(v, dict)  # noqa: E731

FIELDS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "label": (_str, "a text"),
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "message": (_str, "a text"),
    "warmup": (_int_at_least(0), "an integer >= 0"),
    "wall_s": (_samples, "a list of non-negative numbers of seconds"),
    "cpu_s": (_samples, "a list of non-negative numbers of seconds"),
    "cuda_s": (_opt(_samples), "null or a list of non-negative numbers of seconds"),
    "audio_seconds": (_opt(lambda v: _number(v) and v > 0), "null or a positive number of seconds"),
    "memory": (_opt(_dict), "null or a mapping"),
    "counts": (_opt(_dict), "null or a mapping"),
    "energy": (_opt(_dict), "null or a mapping"),
    "settings": (_dict, "a mapping"),
    "env": (_opt(_dict), "null or a mapping"),
    "extra": (_dict, "a mapping"),
}
"""Each field a record may hold: its check and what it must be (the message's words)."""

CELL_FIELDS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "model": (_str, "a text"),
    "variant": (_opt(_str), "null or a text"),
    "device": (_str, "a device name"),
    "threads": (_int_at_least(1), "an integer >= 1"),
    "audio_s": (_opt(lambda v: _number(v) and v > 0), "null or a positive number of seconds"),
    "batch_size": (_opt(_int_at_least(1)), "null or an integer >= 1"),
    "input": (_str, "a text"),
    "run": (_int_at_least(0), "an integer >= 0"),
    "rank": (_opt(_int_at_least(0)), "null or an integer >= 0"),
    "params": (_dict, "a mapping"),
}


def check_record(d: Dict[str, Any]) -> None:
    """Refuse a record dict whose fields have the wrong types, naming the first such field.

    Example
    -------
    >>> check_record({"label": "c", "cell": {"model": "m"}, "wall_s": "0.1"})
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: field 'wall_s' must be a list of non-negative numbers of seconds, got '0.1'
    >>> check_record({"label": "c"})
    Traceback (most recent call last):
    ...
    sbprof.errors.ConfigError: no 'cell' (the record's coordinates)
    """
    if not isinstance(d.get("cell"), dict):
        raise ConfigError("no 'cell' (the record's coordinates)" if "cell" not in d else
                          f"field 'cell' must be a mapping of coordinates, got {d['cell']!r}")
    for where, fields, values in (("", FIELDS, d), ("cell.", CELL_FIELDS, d["cell"])):
        for name, (ok, what) in fields.items():
            if name in values and not ok(values[name]):
                raise ConfigError(f"field '{where}{name}' must be {what}, got {_short(values[name])}")
    if d.get("status", "ok") == "ok" and d.get("audio_seconds") is not None and not d.get("wall_s"):
        raise ConfigError("field 'wall_s' is empty in a measured record (status ok) that states its audio seconds")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
