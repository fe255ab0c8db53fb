"""A per-module breakdown as a record carries it: one row per module, per step on average; plain data.

Times are milliseconds per step (the mean over the reported steps, so rows
add up: a label's total is its self time plus its inner labels' totals, and
the outermost labels plus ``(other)`` make the step). ``share`` is a row's
total over the step time. Backward figures are ``None`` when no backward ran
(never a 0 that reads as "free"); CUDA figures are ``None`` off CUDA. CPU
figures are the process CPU clock (all its threads) read at the same points
as the host clock, forward plus backward; ``None`` in files written before
they were measured. Made by
:mod:`sbprof.measuring.modules`, saved in a record's payload, read back by the
analyses (:mod:`sbprof.analysis.breakdown`): one type from end to end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from sbprof.base.errors import ConfigError
from sbprof.record.check import Fields, at_least, check_fields, optional
from sbprof.record.codec import Codec, from_json, to_json


_MS = (optional(at_least(0)), "null or a number of ms from 0 to 1e30")
ROW_FIELDS: Fields = {"calls": (at_least(0), "a number of calls >= 0"), **dict.fromkeys(
    ("forward_ms", "backward_ms", "cuda_total_ms", "cuda_forward_ms", "cuda_backward_ms", "cpu_total_ms"), _MS)}
"""What a row read from a file must hold: a time inside a module is never negative (self times and ``(other)``
are differences of clocks, and may dip below 0 by a clock's jitter)."""


@dataclass
class ModuleRow(Codec):
    """Times of one label (a module's qualified name, ``optimizer`` or ``(other)``), ms per step."""

    label: str
    type: str
    depth: int
    calls: float
    total_ms: float
    share: float
    forward_ms: Optional[float] = None
    forward_self_ms: Optional[float] = None
    backward_ms: Optional[float] = None
    backward_self_ms: Optional[float] = None
    cuda_total_ms: Optional[float] = None
    cuda_share: Optional[float] = None
    cuda_forward_ms: Optional[float] = None
    cuda_forward_self_ms: Optional[float] = None
    cuda_backward_ms: Optional[float] = None
    cuda_backward_self_ms: Optional[float] = None
    cpu_total_ms: Optional[float] = None
    cpu_self_ms: Optional[float] = None
    memory: Optional[Dict[str, Optional[float]]] = None

    @classmethod
    def from_dict(cls, d: Any) -> "ModuleRow":
        """A row from a file, its times checked for sense (:data:`ROW_FIELDS`), naming the row."""
        if isinstance(d, dict):
            try:
                check_fields(d, ROW_FIELDS)
            except ConfigError as exc:
                raise ConfigError(f"module row {d.get('label')!r}: {exc}") from None
        return from_json(cls, d)


@dataclass
class ModuleBreakdown(Codec):
    """Per-module times of the steps of one name (see the module docstring).

    Example
    -------
    >>> b = ModuleBreakdown("train", "light", 2, [10.0, 12.0], rows=[ModuleRow("enc", "Enc", 0, 1.0, 8.0, 0.73)])
    >>> b.step_ms, b.row("enc").share, ModuleBreakdown.from_dict(b.to_dict()) == b
    (11.0, 0.73, True)
    """

    step: str
    mode: str
    steps: int
    step_ms_samples: List[float]
    cuda_step_ms_samples: Optional[List[float]] = None
    rows: List[ModuleRow] = field(default_factory=list)
    never_ran: List[str] = field(default_factory=list)
    memory_peak: Optional[Dict[str, Optional[float]]] = None
    memory_note: Optional[str] = None
    note: Optional[str] = None
    cpu_step_ms_samples: Optional[List[float]] = None  # process CPU ms of each step (all threads)

    @property
    def step_ms(self) -> float:
        """Mean step time, ms (the denominator of ``share``)."""
        return sum(self.step_ms_samples) / len(self.step_ms_samples)

    def row(self, label: str) -> ModuleRow:
        """The row of ``label``."""
        for row in self.rows:
            if row.label == label:
                return row
        raise ConfigError(f"no row {label!r}; rows: {', '.join(r.label for r in self.rows)}")

    def add_memory(self, rows: Dict[str, Dict[str, int]], peak: Dict[str, int], note: Optional[str] = None) -> None:
        """Put per-module memory (:func:`sbprof.measuring.modules.memory.module_memory`) beside the times."""
        for row in self.rows:
            row.memory = rows.get(row.label)
        self.memory_peak = dict(peak)
        self.memory_note = note

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready plain data, with the derived ``step_ms`` for readers of the file (dropped on read)."""
        return {**to_json(self), "step_ms": self.step_ms}
