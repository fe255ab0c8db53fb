"""The one interface every RNN-T loss backend implements.

A backend adapts one library to the benchmark's convention: :meth:`Backend.loss`
takes padded logits ``(N, T, U+1, V)`` and returns the per-utterance losses
``-log P(y_n | x_n)`` (nats, not normalised; see
:mod:`sbprof.transducer.backends.reference`), differentiable with respect to the
logits. :meth:`Backend.train_loss` is what one benchmark step computes from a
:class:`~sbprof.transducer.inputs.JointBatch`; by default it runs the joiner on
the full lattice and calls :meth:`loss`, and backends with a cheaper training
path (k2's pruned loss, optimized_transducer's packed logits) override it.

Importing a backend module never imports its library: that happens in
:meth:`Backend.available` and :meth:`Backend.loss`, inside the worker process
that measures it (possibly another Python interpreter).
"""
from __future__ import annotations

import copy
import importlib
from typing import Dict, Optional, Tuple

import torch

from sbprof.workers.protocol import one_line


def try_import(module: str) -> Tuple[bool, str]:
    """``(True, "")`` when ``module`` imports, else ``(False, "Type: message")``.

    Example
    -------
    >>> try_import("json")
    (True, '')
    >>> ok, why = try_import("no_such_module_xyz")
    >>> ok, why.startswith("ModuleNotFoundError")
    (False, True)
    """
    try:
        importlib.import_module(module)
    except Exception as exc:  # a broken install raises anything: report it, do not crash
        return False, one_line(exc)
    return True, ""


def int32(*tensors: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """``tensors`` as contiguous int32, the labels and lengths the C++/CUDA losses take.

    Example
    -------
    >>> [t.dtype for t in int32(torch.tensor([1, 2]), torch.tensor([3]))]
    [torch.int32, torch.int32]
    """
    return tuple(t.to(torch.int32).contiguous() for t in tensors)


class Backend:
    """Base class of the adapters (one file per backend in this package).

    Attributes
    ----------
    name : str
        The key used in configs and tables.
    module : str
        The module whose import decides :meth:`available`.
    install_hint : str
        How to install it (shown in "not installed" rows).
    devices : tuple of str
        Device types it can be measured on (``cpu``, ``cuda``).
    check_devices : tuple of str
        Device types its agreement check can run on (may include ``cpu``
        where a simulator makes a CUDA-only code run, slowly).
    env : dict
        Environment variables its worker process needs before start.
    in_process : bool
        Whether it can run inside the parent interpreter (``False`` when it
        needs ``env`` set before its library is first imported).
    convention : str
        How the library's own output relates to the common convention, and
        what the adapter does about it.
    options : tuple of str
        Attributes a config may set (e.g. k2_pruned's ``s_range``).
    """

    name = ""
    module = ""
    install_hint = ""
    devices: Tuple[str, ...] = ("cpu", "cuda")
    check_devices: Tuple[str, ...] = ("cpu", "cuda")
    env: Dict[str, str] = {}
    in_process = True
    convention = "per-utterance -log P(y|x), as returned by the library"
    options: Tuple[str, ...] = ()

    def configured(self, options: Dict[str, object]) -> "Backend":
        """A copy with ``options`` set; ``ValueError`` naming an unknown one.

        Example
        -------
        >>> Backend().configured({"speed": 2})
        Traceback (most recent call last):
        ...
        ValueError: backend '' has no option 'speed' (it has: none)
        """
        clone = copy.copy(self)
        for key, value in options.items():
            if key not in self.options:
                raise ValueError(f"backend {self.name!r} has no option {key!r} "
                                 f"(it has: {', '.join(self.options) or 'none'})")
            setattr(clone, key, value)
        return clone

    def available(self) -> Tuple[bool, str]:
        """Whether the library imports here, and why not."""
        return try_import(self.module)

    def unsupported_reason(self, device: str) -> Optional[str]:
        """Why this backend cannot be measured on ``device`` (``None`` if it can)."""
        kind = torch.device(device).type
        if kind not in self.devices:
            return f"{self.name} runs on {', '.join(self.devices)} only"
        return None

    def loss(self, logits: torch.Tensor, targets: torch.Tensor, logit_lengths: torch.Tensor,
             target_lengths: torch.Tensor, blank: int) -> torch.Tensor:
        """Per-utterance losses ``(N,)`` of padded ``logits`` (see the module docstring)."""
        raise NotImplementedError

    def train_loss(self, batch) -> torch.Tensor:
        """The losses of one benchmark step, joiner included: per utterance, or
        already summed where the library only reduces (the step backpropagates the sum)."""
        return self.loss(batch.logits(), batch.targets, batch.logit_lengths, batch.target_lengths, batch.blank)

    def describe(self) -> Dict[str, object]:
        """The adapter's static facts, for reports."""
        return {"name": self.name, "module": self.module, "install_hint": self.install_hint,
                "devices": list(self.devices), "env": dict(self.env), "in_process": self.in_process,
                "convention": self.convention}
