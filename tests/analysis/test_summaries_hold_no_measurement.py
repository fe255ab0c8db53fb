"""No summary a job's analysis returns holds a raw :class:`~sbprof.record.Measurement`: the renderers get the typed
figures the analysis computed once, never a record to compute from (issue 41).

The walk follows the type hints of every dataclass reachable from each job's ``analyse`` return type (and from
the summaries of ``merge``, ``gate`` and the cluster report), through ``Optional``, ``List``, ``Dict``,
``Tuple``..., so a field added later that holds a record, or a list of them, fails here by name.
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

from sbprof.analysis.cluster import analyse_cluster
from sbprof.analysis.distributed import summarise_run
from sbprof.analysis.gate import gate
from sbprof.script import VARY
from sbprof.jobs.job import Lazy
from sbprof.record import Measurement
from sbprof.registry import JOBS

ALL_JOBS = {**JOBS, VARY.name: VARY}
COMMANDS = {"merge": summarise_run, "gate": gate, "cluster": analyse_cluster}
"""The analyses of the commands that are not jobs, whose summaries their renderers format too."""


def _function(part: Any) -> Any:
    """The plain function behind a job's ``analyse`` (imported when lazy, unwrapped when partial)."""
    while True:
        if isinstance(part, Lazy):
            part = part.target
        elif isinstance(part, functools.partial):
            part = part.func
        else:
            return part


def _types(hint: Any) -> Iterator[Any]:
    """The classes a type hint names, through its generic arguments (``Optional[List[X]]`` -> X...)."""
    args = typing.get_args(hint)
    if args:
        origin = typing.get_origin(hint)
        if isinstance(origin, type):
            yield origin
        for arg in args:
            yield from _types(arg)
    elif isinstance(hint, type):
        yield hint


def measurement_paths(root: type) -> List[str]:
    """Every ``Class.field`` path, from ``root``, whose type names :class:`Measurement`."""
    found: List[str] = []
    seen: Set[type] = set()
    todo: List[Tuple[type, str]] = [(root, root.__name__)]
    while todo:
        cls, path = todo.pop()
        if cls in seen or not dataclasses.is_dataclass(cls):
            continue
        seen.add(cls)
        hints: Dict[str, Any] = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            for t in _types(hints[f.name]):
                if isinstance(t, type) and issubclass(t, Measurement):
                    found.append(f"{path}.{f.name}")
                else:
                    todo.append((t, f"{path}.{f.name}"))
    return sorted(found)


@pytest.mark.parametrize("name", sorted(ALL_JOBS) + sorted(COMMANDS))
def test_no_summary_field_holds_a_measurement(name: str) -> None:
    analyse = ALL_JOBS[name].analyse if name in ALL_JOBS else COMMANDS[name]
    summary = typing.get_type_hints(_function(analyse))["return"]
    assert dataclasses.is_dataclass(summary), f"{name}: analyse returns {summary!r}, not a summary dataclass"
    paths = measurement_paths(summary)
    assert not paths, f"{name}'s summary hands raw records to its renderers: {paths}"


@dataclasses.dataclass
class _Row:
    rows: Dict[str, List[Optional[Measurement]]]


@dataclasses.dataclass
class _Summary:
    label: str
    inner: Optional[Tuple[_Row, ...]]


def test_the_walk_finds_a_record_however_deep() -> None:
    assert measurement_paths(_Summary) == ["_Summary.inner.rows"]
