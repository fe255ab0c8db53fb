"""What a parameter count returns: totals, bytes per dtype, one row per module, shared tensors; plain data.

Made by :func:`sbprof.measuring.params.count_params`, saved in a record's
payload (the ``params`` job's result, a training cell's and ``sbprof run``'s
``params``), read back by the analyses: one type from end to end. A tensor
registered under several names is counted once (see the measuring module).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec, to_json


@dataclass(frozen=True)
class ModuleParams:
    """Parameters of one module and its submodules (``own``: registered on the module itself)."""

    name: str
    type: str
    depth: int
    total: int
    trainable: int
    own: int
    shared: bool


@dataclass(frozen=True)
class SharedParam:
    """One tensor registered under several names."""

    names: Tuple[str, ...]
    numel: int


@dataclass(frozen=True)
class ParamCount(Codec):
    """Result of :func:`count_params`."""

    total: int
    trainable: int
    bytes_by_dtype: Dict[str, int] = field(default_factory=dict)
    buffers: int = 0
    buffer_bytes_by_dtype: Dict[str, int] = field(default_factory=dict)
    modules: Tuple[ModuleParams, ...] = ()
    shared: Tuple[SharedParam, ...] = ()

    @property
    def frozen(self) -> int:
        return self.total - self.trainable

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_dtype.values())

    def module(self, name: str) -> ModuleParams:
        """The row of the module registered as ``name`` (``""`` for the root)."""
        for row in self.modules:
            if row.name == name:
                return row
        raise ConfigError(f"model has no module named {name!r}")

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready plain data, with the derived ``frozen`` and ``bytes`` for readers (dropped on read)."""
        return {**to_json(self), "frozen": self.frozen, "bytes": self.bytes}
