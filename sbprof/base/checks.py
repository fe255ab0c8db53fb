"""Checks of user input, each raising one :class:`~sbprof.base.errors.ConfigError` that names the value.

One helper per kind of value, shared by every entry point (``measure``, the
decorators' schedules, the YAML recipes, the command line), so the same
mistake gets the same message everywhere. ``where`` prefixes the message with
the file or key that holds the value.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, Optional, Sequence, Tuple

from sbprof.base.errors import ConfigError

_DEVICE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


def _at(where: str, name: str) -> str:
    return f"{where}: {name}" if where else name


def is_int(value: Any) -> bool:
    """An int that is not a bool (YAML's ``True`` is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


MAX_COUNT = 2**31 - 1
"""Largest size, count or repeat accepted: torch takes sizes beyond it only to fail inside a cell (an overflow)."""


def check_int(value: Any, name: str, minimum: int, where: str = "", maximum: int = MAX_COUNT) -> int:
    """``value`` as an integer from ``minimum`` to ``maximum``.

    Example
    -------
    >>> check_int(3, "seed", 0)
    3
    >>> check_int(True, "measured_batches", 1)
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: measured_batches must be an integer >= 1, got True
    """
    if not is_int(value) or value < minimum:
        raise ConfigError(f"{_at(where, name)} must be an integer >= {minimum}, got {value!r}")
    if value > maximum:
        raise ConfigError(f"{_at(where, name)} must be at most {maximum:,}, got {value!r}")
    return value


def is_positive_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def check_flag(value: Any, name: str, where: str = "") -> bool:
    """``value`` as a boolean (``True``/``False``, not ``1`` or ``"yes"``)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{_at(where, name)} must be True or False, got {value!r}")
    return value


def check_list(value: Any, name: str, integers: bool, where: str = "") -> Tuple[Any, ...]:
    """A non-empty list of distinct positive integers (``integers``) or positive finite numbers, none beyond
    :data:`MAX_COUNT`.

    Example
    -------
    >>> check_list([1, 2.5], "audio_mockup_secs", integers=False)
    (1, 2.5)
    >>> check_list([1, 1], "batch_sizes", integers=True)
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: batch_sizes lists a value twice: [1, 1]
    """
    what = "positive integers" if integers else "positive numbers"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{_at(where, name)} must be a non-empty list of {what}, got {value!r}")
    for v in value:
        if not ((is_int(v) and v >= 1) if integers else is_positive_number(v)):
            raise ConfigError(f"{_at(where, name)} must hold only {what}, got {v!r} in {list(value)!r}")
        if v > MAX_COUNT:
            raise ConfigError(f"{_at(where, name)} must hold only values up to {MAX_COUNT:,}, got {v!r}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{_at(where, name)} lists a value twice: {list(value)!r}")
    return tuple(value)


def check_choices(value: Any, name: str, known: Sequence[str], where: str = "", noun: str = "name") -> Tuple[str, ...]:
    """A non-empty list of distinct ``noun``s from ``known`` (one alone is a list of one).

    Example
    -------
    >>> check_choices("ctc", "variants", ["ctc", "transducer"])
    ('ctc',)
    >>> check_choices(["ctc", "rnnt"], "variants", ["ctc", "transducer"], "t.yaml", "variant")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: t.yaml: variants: unknown variant 'rnnt'; known: ctc, transducer
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError(f"{_at(where, name)} must be a non-empty list from {', '.join(known)}, got {value!r}")
    for item in items:
        if item not in known:
            raise ConfigError(f"{_at(where, name)}: unknown {noun} {item!r}{nearest(str(item), list(known))}; "
                              f"known: {', '.join(known)}")
    if len(set(items)) != len(items):
        raise ConfigError(f"{_at(where, name)} lists a {noun} twice: {list(items)!r}")
    return tuple(items)


def check_text(tree: Mapping[str, Any], key: str, where: str) -> Optional[str]:
    """``tree[key]``: a non-empty string, or ``None`` when the key is absent or null.

    Example
    -------
    >>> check_text({"type": "EncoderASR"}, "type", "c.yaml: model"), check_text({}, "method", "c.yaml: model")
    ('EncoderASR', None)
    >>> check_text({"type": ""}, "type", "c.yaml: model")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: c.yaml: model.type must be a non-empty string, got ''
    """
    value = tree.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{where}.{key} must be a non-empty string, got {value!r}")
    return value


MAX_NAME_CHARS = 100
"""Longest name that becomes part of a file name (a file name holds at most 255 bytes)."""


def check_file_name(value: Any, name: str, where: str = "") -> str:
    """A name that becomes (part of) a file or folder name: text without a path separator, not ``.`` or ``..``.

    Example
    -------
    >>> check_file_name("fast-v2", "variants[0].name")
    'fast-v2'
    >>> check_file_name("../x/y", "variants[0].name", "c.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: c.yaml: variants[0].name '../x/y' becomes a file name: it must not hold '/' ...
    """
    if not isinstance(value, str):
        raise ConfigError(f"{_at(where, name)} must be a name (text), got {value!r}")
    if value in ("", ".", "..") or any(c in value for c in "/\\\0"):
        raise ConfigError(f"{_at(where, name)} {value!r} becomes a file name: it must not hold '/' or '\\', "
                          "be '.' or '..', or be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ConfigError(f"{_at(where, name)} is {len(value)} characters long; a name that becomes a file name "
                          f"holds at most {MAX_NAME_CHARS}")
    return value


def parse_device(value: Any, where: str = "", name: str = "device") -> Tuple[str, Optional[int]]:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"`` as ``(type, index)``, without touching CUDA.

    Example
    -------
    >>> parse_device("cuda:1"), parse_device("cpu"), parse_device("cuda")
    (('cuda', 1), ('cpu', None), ('cuda', None))
    """
    match = _DEVICE.match(value) if isinstance(value, str) else None
    if match is None or (match.group(1) == "cpu" and match.group(2) is not None):
        raise ConfigError(f"{_at(where, name)}: {value!r} is not a device (use cpu, cuda or cuda:N)")
    index = match.group(2)
    return match.group(1), None if index is None else int(index)


def nearest(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or ``""``.

    Example
    -------
    >>> nearest("EncoderASRR", ["EncoderASR", "VAD"])
    " (did you mean 'EncoderASR'?)"
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


THREADS_PER_CORE = 16
"""Most threads a setting may ask for per logical core: beyond, they only queue for the cores, and creating
them can fail (``libgomp: Thread creation failed``) and abort the whole process."""


def check_threads_count(value: Any, name: str, where: str = "") -> int:
    """A thread count from 1 to :data:`THREADS_PER_CORE` per logical core of this machine.

    Example
    -------
    >>> import os
    >>> check_threads_count(1, "num_threads")
    1
    >>> check_threads_count(10**6, "num_threads")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: num_threads is 1000000: at most 16 threads per logical core (... here)...
    """
    import os

    check_int(value, name, 1, where)
    cores = os.cpu_count() or 1
    if value > THREADS_PER_CORE * cores:
        raise ConfigError(f"{_at(where, name)} is {value}: at most {THREADS_PER_CORE} threads per logical core "
                          f"({THREADS_PER_CORE * cores} here); more only queue for the cores, and creating them "
                          "can abort the process")
    return value
