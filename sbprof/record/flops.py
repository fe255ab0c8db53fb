"""What a FLOP count returns: totals, one row per module, one per operator; plain data.

Every row and total comes in forward and backward parts. Backward figures are
None when no backward was counted (never a 0 that could be read as "free").
Made by :mod:`sbprof.measuring.flops`, saved in a record's payload, read back
by the analyses (:mod:`sbprof.analysis.counts`): one type from end to end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec, to_json


@dataclass
class ModuleFlops:
    """FLOPs and MACs of one module, by its registered name (``""`` is the root).

    ``flops``/``macs`` include the submodules registered under it (its rows
    nest by name); ``self_*`` only the operators run by the module's own code.
    Backward operators belong to the module whose forward created them.
    """

    name: str
    type: str
    depth: int
    calls: int
    flops: int
    macs: int
    self_flops: int
    self_macs: int
    backward_flops: Optional[int] = None
    backward_macs: Optional[int] = None
    self_backward_flops: Optional[int] = None
    self_backward_macs: Optional[int] = None


@dataclass
class OperatorFlops:
    """Calls, FLOPs and MACs of one aten operator (e.g. ``aten.addmm``), forward and backward."""

    name: str
    calls: int
    flops: int
    macs: int
    backward_calls: int = 0
    backward_flops: int = 0
    backward_macs: int = 0

    @property
    def total_calls(self) -> int:
        """Calls over the forward and the backward."""
        return self.calls + self.backward_calls


@dataclass(frozen=True)
class FlopCount(Codec):
    """Result of counting one model call (and its backward, when asked).

    Example
    -------
    >>> c = FlopCount(flops=10, macs=4, backward_flops=20, backward_macs=8, conventions="sbprof-flops-1")
    >>> (c.total_flops, c.total_macs, c.to_dict()["conventions"])
    (30, 12, 'sbprof-flops-1')
    """

    flops: int
    macs: int
    backward_flops: Optional[int] = None
    backward_macs: Optional[int] = None
    modules: Tuple[ModuleFlops, ...] = ()
    operators: Tuple[OperatorFlops, ...] = ()
    untracked: Dict[str, int] = field(default_factory=dict)
    conventions: Optional[str] = None  # the formula table's version (sbprof.measuring.flops.CONVENTIONS)
    # MACs of the products by the precision they ran in (fp32, tf32, bf16, fp16...), forward and counted backward
    macs_by_precision: Dict[str, int] = field(default_factory=dict)

    @property
    def total_flops(self) -> Optional[int]:
        """Forward + backward FLOPs; None when no backward was counted."""
        return None if self.backward_flops is None else self.flops + self.backward_flops

    @property
    def total_macs(self) -> Optional[int]:
        """Forward + backward MACs; None when no backward was counted."""
        return None if self.backward_macs is None else self.macs + self.backward_macs

    def module(self, name: str) -> ModuleFlops:
        """The row of the module registered as ``name`` (``""`` for the root)."""
        for row in self.modules:
            if row.name == name:
                return row
        raise ConfigError(f"no module named {name!r} ran while counting; known: "
                          f"{', '.join(repr(r.name) for r in self.modules[:20])}")

    def operator(self, name: str) -> OperatorFlops:
        """The row of operator ``name`` (``"aten.mm"``); an all-zero row when it never ran."""
        for row in self.operators:
            if row.name == name:
                return row
        return OperatorFlops(name, 0, 0, 0)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready plain data, with the derived totals for readers of the file (the codec drops them on read)."""
        return {**to_json(self), "total_flops": self.total_flops, "total_macs": self.total_macs}
