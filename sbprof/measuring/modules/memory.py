"""Per-module memory of one step, by category, from torch's ``MemTracker``.

``torch.distributed._tools.mem_tracker.MemTracker`` (a dispatch mode, so it
slows the step it watches: run it on a step of its own, never a timed one)
follows every tensor storage the step creates and files it as parameter,
buffer, gradient, activation, temporary (backward) or optimiser state. For
each module it keeps a snapshot of all tracked memory when the module starts
its forward and backward, and at the highest point reached while it runs
them. From those this module reports, per selected module:

- ``params_bytes``: its parameters; ``output_bytes``: what its forward returns;
- ``forward_peak_bytes``: tracked memory at the highest point of its forward,
  and ``forward_added_bytes``: that peak minus the memory in use when its forward began;
- ``backward_peak_bytes`` and ``backward_added_bytes``: the same for its backward,

and, for the step, the categories at the step's peak.

Where it falls short (torch 2.14): its backward boundaries come from
``ModTracker``'s multi-grad hooks, so a module whose inputs need no gradient
(a front end fed with features) is left only when the whole backward ends:
its backward peak then covers the rest of the backward. A second step in the
same tracker needs ``reset_mod_stats()`` (it raises otherwise): each call here
uses a fresh tracker. Storages made outside PyTorch's dispatcher are not seen.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch

from sbprof.base.errors import BackendUnavailable

CATEGORIES = ("Parameter", "Buffer", "Gradient", "Activation", "Temp", "Optstate", "Other")
TOTAL = "Total"
MEMORY_NOTE = ("Backward memory of a module whose inputs need no gradient runs to the end of the backward "
               "(MemTracker's module boundaries).")


def _device_snapshot(snapshot: Dict[Any, Dict[Any, int]], device: torch.device) -> Dict[str, int]:
    per_device = snapshot.get(device) or {}
    return {str(getattr(k, "value", k)): int(v) for k, v in per_device.items()}


def module_memory(root: torch.nn.Module, run_step: Callable[[], Any], names: Sequence[str],
                  optimizers: Sequence[torch.optim.Optimizer] = (),
                  device: Optional[torch.device] = None) -> Tuple[Dict[str, Dict[str, int]], Dict[str, int]]:
    """Run ``run_step()`` once under a fresh ``MemTracker``; per-module memory and the step's peak by category.

    Arguments
    ---------
    root : torch.nn.Module
        The model whose modules are named (``names`` are relative to it).
    run_step : callable
        One step (forward, backward, optimiser).
    names : sequence of str
        The modules to report.
    optimizers : sequence of torch.optim.Optimizer
        Their existing state is counted as optimiser state.
    device : torch.device, optional
        Whose memory to report (default: the device of the first parameter).

    Returns
    -------
    (rows, peak)
        ``rows``: name -> figures (see the module docstring; modules that did
        not run are absent); ``peak``: category -> bytes at the step's peak.

    Example
    -------
    >>> model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
    >>> x = torch.randn(64, 256)
    >>> rows, peak = module_memory(model, lambda: model(x).sum().backward(), ["0"])
    >>> rows["0"]["params_bytes"] == (256 * 256 + 256) * 4 and rows["0"]["output_bytes"] == 64 * 256 * 4
    True
    >>> peak["Parameter"] == rows["0"]["params_bytes"]
    True
    """
    try:
        from torch.distributed._tools.mem_tracker import MemTracker, _ModState
    except ImportError as exc:  # torch built without distributed tools
        raise BackendUnavailable(f"torch's MemTracker is not available here ({exc})") from None
    if device is None:
        first = next(root.parameters(), None)
        device = first.device if first is not None else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    wanted = {id(module): name for name, module in root.named_modules() if name in set(names)}
    tracker = MemTracker()
    tracker.track_external(root, *optimizers)
    with tracker:
        run_step()
    rows: Dict[str, Dict[str, int]] = {}
    for module, stats in tracker.memory_tracking.items():
        name = wanted.get(id(module))
        if name is None:
            continue
        snaps = stats.snapshots
        row = {"params_bytes": int(stats.parameter_mem), "output_bytes": int(getattr(stats, "output_mem", 0))}
        for phase, pre, peak in (("forward", _ModState.PRE_FW, _ModState.PEAK_FW),
                                 ("backward", _ModState.PRE_BW, _ModState.PEAK_BW)):
            peaks = [_device_snapshot(s, device).get(TOTAL, 0) for s in snaps.get(peak, ())]
            starts = [_device_snapshot(s, device).get(TOTAL, 0) for s in snaps.get(pre, ())]
            if peaks and len(starts) == len(peaks):  # one (start, peak) pair per call
                row[f"{phase}_peak_bytes"] = max(peaks)
                row[f"{phase}_added_bytes"] = max(0, max(p - s for p, s in zip(peaks, starts)))
        rows[name] = row
    peak = _device_snapshot(tracker.get_tracker_snapshot("peak"), device)
    return rows, {k: peak.get(k, 0) for k in CATEGORIES + (TOTAL,)}
