"""Parameter counts of a model: total, trainable, per submodule, shared tensors, bytes per dtype.

A parameter registered under several names (tied weights: a decoder's output
layer sharing the embedding's matrix) is one tensor: it is counted once in
every total, listed in ``shared`` with all its names, and the rows holding
it are flagged. Each module's row counts the distinct parameters of its
subtree, so the rows of two subtrees sharing a tensor each count it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import torch

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


def _numel(name: str, tensor: torch.Tensor) -> int:
    if isinstance(tensor, torch.nn.parameter.UninitializedParameter):
        raise ConfigError(f"parameter {name!r} is not initialised yet (lazy module): run one forward first")
    return tensor.numel()


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def count_params(model: torch.nn.Module) -> ParamCount:
    """Count the parameters (and buffers) of ``model``, shared tensors once.

    Arguments
    ---------
    model : torch.nn.Module

    Returns
    -------
    ParamCount

    Example
    -------
    >>> emb = torch.nn.Embedding(100, 8)
    >>> out = torch.nn.Linear(8, 100)
    >>> out.weight = emb.weight                       # tied
    >>> c = count_params(torch.nn.ModuleDict({"emb": emb, "out": out}))
    >>> c.total == 100 * 8 + 100, c.shared[0].names, c.bytes_by_dtype
    (True, ('emb.weight', 'out.weight'), {'float32': 3600})
    """
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"count_params needs a torch.nn.Module, got {type(model).__name__}")
    names: Dict[int, List[str]] = defaultdict(list)
    tensors: Dict[int, torch.Tensor] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names[id(param)].append(name)
        tensors[id(param)] = param
    sizes = {key: _numel(names[key][0], tensor) for key, tensor in tensors.items()}
    shared_ids = {key for key, found in names.items() if len(found) > 1}
    by_dtype: Dict[str, int] = defaultdict(int)
    for key, tensor in tensors.items():
        by_dtype[_dtype_name(tensor)] += sizes[key] * tensor.element_size()
    buffer_bytes: Dict[str, int] = defaultdict(int)
    buffers = 0
    for buffer in model.buffers():
        buffers += buffer.numel()
        buffer_bytes[_dtype_name(buffer)] += buffer.numel() * buffer.element_size()
    rows = []
    for name, module in model.named_modules():
        ids = {id(p) for p in module.parameters()}
        rows.append(ModuleParams(
            name=name, type=type(module).__name__, depth=name.count(".") + 1 if name else 0,
            total=sum(sizes[i] for i in ids), trainable=sum(sizes[i] for i in ids if tensors[i].requires_grad),
            own=sum(sizes[id(p)] for p in module.parameters(recurse=False)), shared=bool(ids & shared_ids)))
    return ParamCount(
        total=sum(sizes.values()), trainable=sum(sizes[i] for i, t in tensors.items() if t.requires_grad),
        bytes_by_dtype=dict(sorted(by_dtype.items())), buffers=buffers,
        buffer_bytes_by_dtype=dict(sorted(buffer_bytes.items())), modules=tuple(rows),
        shared=tuple(SharedParam(tuple(names[i]), sizes[i]) for i in tensors if i in shared_ids))
