"""One codec for every dataclass sbprof saves: dataclass <-> JSON, driven by the type hints.

:func:`to_json` turns a dataclass (nested dataclasses, lists, tuples, dicts,
optionals, paths) into plain JSON values; :func:`from_json` rebuilds it from
its type hints, so no class writes its own ``to_dict`` / ``from_dict``. A key
the class does not know is dropped here (a record's payload is held to its
declaration when a results file is read: :mod:`sbprof.analysis.payloads`),
a missing one takes its default; a value of the wrong kind is one :class:`ConfigError` naming
where it sits. Versions and migration of whole files stay with the record
(:mod:`sbprof.record.migrate`): the codec reads today's shape only.
:class:`Codec` gives a dataclass ``to_dict`` and ``from_dict`` from it.

Example
-------
>>> import typing
>>> from dataclasses import dataclass, field
>>> @dataclass
... class Point(Codec):
...     x: float
...     tags: typing.List[str] = field(default_factory=list)
...     child: typing.Optional[Point] = None
>>> p = Point.from_dict({"x": 1, "child": {"x": 2.5, "tags": ["a"]}, "newer_key": 0})
>>> p
Point(x=1, tags=[], child=Point(x=2.5, tags=['a'], child=None))
>>> p.to_dict()
{'x': 1, 'tags': [], 'child': {'x': 2.5, 'tags': ['a'], 'child': None}}
>>> Point.from_dict({"x": "fast"})
Traceback (most recent call last):
...
sbprof.base.errors.ConfigError: Point.x: expected a number, got 'fast'
"""
from __future__ import annotations

import dataclasses
import typing
from functools import lru_cache
from pathlib import PurePath
from typing import Any, Dict, Type, TypeVar, Union

from sbprof.base.errors import ConfigError

T = TypeVar("T")
_NONE = type(None)


def to_json(value: Any) -> Any:
    """Plain JSON values (dict, list, str, number, bool, None) of ``value``, dataclasses included.

    ``value`` itself is written field by field; a dataclass inside it that has
    a ``to_dict`` (its own, writing derived figures or a version beside its
    fields) is written by that, as :func:`from_json` reads it with its own
    ``from_dict``.

    Example
    -------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Span(Codec):
    ...     low: float
    ...     high: float
    ...     def to_dict(self) -> dict:
    ...         return {**to_json(self), "width": self.high - self.low}
    >>> @dataclass
    ... class Fit(Codec):
    ...     span: Span
    ...     runs: typing.Tuple[int, ...] = ()
    >>> Fit(Span(1.0, 3.0), (4, 5)).to_dict()
    {'span': {'low': 1.0, 'high': 3.0, 'width': 2.0}, 'runs': [4, 5]}
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _nested(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _nested(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nested(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value


def _nested(value: Any) -> Any:
    own = getattr(value, "to_dict", None)
    if own is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return own()
    return to_json(value)


@lru_cache(maxsize=None)
def field_hints(cls: type) -> Dict[str, Any]:
    """The resolved type of each field of the dataclass ``cls`` (cached per class).

    >>> from sbprof.record import Cell
    >>> field_hints(Cell)["audio_s"]
    typing.Optional[float]
    """
    # Resolved once per class; "from __future__ import annotations" leaves them as strings (the class may name
    # itself in them). No global namespace given: each field resolves in the module of the class that declares
    # it, so a subclass in another module reads its base's fields.
    return typing.get_type_hints(cls, None, {cls.__name__: cls})


def from_json(cls: Type[T], data: Any, where: str = "") -> T:
    """``cls`` (a dataclass) rebuilt from :func:`to_json`'s output; unknown keys dropped, missing ones defaulted."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_short(data)}")
    hints = field_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    values = {name: _value(hints[name], data[name], f"{where}.{name}") for name in known if name in data}
    missing = [name for name, f in known.items() if name not in values and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    return cls(**values)


def _value(hint: Any, data: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return data
    if origin is Union:
        if data is None and _NONE in args:
            return None
        options = [a for a in args if a is not _NONE]
        if len(options) == 1:
            return _value(options[0], data, where)
        for option in options:  # the first that reads it
            try:
                return _value(option, data, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {_short(data)} is none of {', '.join(_name(o) for o in options)}")
    if dataclasses.is_dataclass(hint):
        own = getattr(hint, "from_dict", None)  # a class that reads more than its fields (a migration)
        if own is not None and getattr(own, "__func__", None) is not Codec.from_dict.__func__:
            return own(data)
        return from_json(hint, data, where)
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(data, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {_short(data)}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(data):
                raise ConfigError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
        item = args[0] if args else Any
        items = [_value(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if (origin or hint) is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping, got {_short(data)}")
        key, item = args if args else (Any, Any)
        return {_key(key, k): _value(item, v, f"{where}[{k!r}]") for k, v in data.items()}
    if hint is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {_short(data)}")
        return data
    if hint in (int, str, bool):
        if not isinstance(data, hint) or (hint is int and isinstance(data, bool)):
            raise ConfigError(f"{where}: expected {_name(hint)}, got {_short(data)}")
        return data
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return hint(data)
    return data  # a type the codec does not check (a Literal, a Protocol): kept as read


def _key(hint: Any, key: str) -> Any:
    # JSON keys are strings: an int-keyed dict comes back with int keys.
    return int(key) if hint is int else key


def _name(hint: Any) -> str:
    return {int: "an integer", str: "a string", bool: "true or false", float: "a number"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _short(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= 60 else text[:57] + "..."


class Codec:
    """``to_dict`` / ``from_dict`` for a dataclass, from :func:`to_json` / :func:`from_json`."""

    def to_dict(self) -> dict:
        return to_json(self)

    @classmethod
    def from_dict(cls: Type[T], d: dict) -> T:
        return from_json(cls, d)
