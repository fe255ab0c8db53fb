"""Parameter counts of a model: total, trainable, per submodule, shared tensors, bytes per dtype.

A parameter registered under several names (tied weights: a decoder's output
layer sharing the embedding's matrix) is one tensor: it is counted once in
every total, listed in ``shared`` with all its names, and the rows holding
it are flagged. Each module's row counts the distinct parameters of its
subtree, so the rows of two subtrees sharing a tensor each count it.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List

import torch

from sbprof.base.errors import ConfigError
from sbprof.record.params import ModuleParams, ParamCount, SharedParam


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
