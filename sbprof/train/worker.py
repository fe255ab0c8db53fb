"""The worker side of the training recipe: one variant trained by a real ``Brain``, profiled by one decorator.

``python -m sbprof.train.worker RESULT_FD`` (see :mod:`sbprof.workers.cells`):
a fresh process per (setting, variant, run), so a crash, the OOM killer or
a hang in one variant is that cell's record and the others go on. Per cell:

1. the timed run: ``profile(brain, activities=(), modules=...)`` (light
   attribution: clocks only, no operator recording) and ``brain.fit`` over
   ``warmup + measured`` steps cycling through the mock-up batches; the first
   ``warmup`` steps are left out of every figure;
2. memory, outside the timed steps: the process's resident peak (CPU) or the
   allocator's peak (CUDA) during one step on the longest batch, then one step
   under torch's MemTracker for per-module memory (it slows what it watches);
3. FLOPs of forward + backward of each distinct batch (the optimiser's few
   operations per parameter are left out), and parameter counts;
4. on request, a trace: ``trace_steps`` more steps under torch.profiler with
   detailed attribution (``record_function`` labels), exported.

Every finished cell is one :class:`~sbprof.record.Measurement`.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List

import torch

from sbprof.analysis.train import FlopsPayload, TrainPayload
from sbprof.measuring.env import collect_env
from sbprof.measuring.memory import release_memory
from sbprof.record import Cell, Counts, MemoryPeak, Measurement
from sbprof.record.cell import setting_name
from sbprof.record.params import ParamCount
from sbprof.train.config import TrainConfig
from sbprof.train.data import MockBatches, mock_batches
from sbprof.train.models import build_modules
from sbprof.workers.cells import CellWorker, serve_cells

TRACE_DIR = "traces"


def _plain_step(brain: Any, batch: Any) -> Any:
    """One training step with the class's own ``fit_batch`` (the decorator's hooks are on the instance)."""
    return type(brain).fit_batch(brain, batch)


def _with_losses(brain_class: type) -> type:
    """The Brain class, keeping each training step's loss (what ``fit_batch`` returns, already on the host) in
    ``step_losses``: the figure that shows whether a lower precision still trains. Same name, same steps."""
    class Keeping(brain_class):
        def fit_batch(self, batch: Any) -> Any:
            loss = super().fit_batch(batch)
            self.__dict__.setdefault("step_losses", []).append(float(loss))
            return loss

    Keeping.__name__ = Keeping.__qualname__ = brain_class.__name__
    return Keeping


def step_peak(brain: Any, batch: Any, device: str) -> MemoryPeak:
    """Peak memory of one training step."""
    from sbprof.measuring.memory import CpuPeak, CudaPeak

    if device.startswith("cuda"):
        tracker = CudaPeak(device)
        tracker.start()
        _plain_step(brain, batch)
        peak, delta, reserved = tracker.stop()
        return MemoryPeak(peak_cuda_bytes=peak, peak_cuda_delta_bytes=delta, peak_cuda_reserved_bytes=reserved)
    tracker = CpuPeak()
    tracker.start()
    _plain_step(brain, batch)
    peak, delta = tracker.stop()
    return MemoryPeak(peak_rss_bytes=peak, peak_rss_delta_bytes=delta, rss_method=tracker.method,
                      heap_trim=tracker.heap_trim)


def step_flops(brain: Any, batch: Any) -> Any:
    """FLOPs of forward + backward of one batch, per module of ``brain.modules``."""
    import speechbrain as sb

    from sbprof.measuring.flops import FlopCounter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untracked operators are listed in the result instead
        with FlopCounter(brain.modules) as counter:
            with brain.training_ctx:  # the run's autocast, as fit_batch runs it: products counted in their precision
                outputs = brain.compute_forward(batch, sb.Stage.TRAIN)
                loss = brain.compute_objectives(outputs, batch, sb.Stage.TRAIN)
            loss.backward()
    brain.zero_grad(set_to_none=True)
    return counter.result(backward=True)


def flops_extra(counts: List[Any], order: List[int], labels: List[str]) -> FlopsPayload:
    """Per measured step FLOPs/MACs, per selected module (mean per step), untracked operators."""
    per_step = [counts[i].total_flops for i in order]
    modules: Dict[str, List[float]] = {}
    for label in labels:
        rows = [next((r for r in counts[i].modules if r.name == label), None) for i in order]
        if all(r is not None for r in rows):
            modules[label] = [sum(r.flops for r in rows) / len(rows), sum(r.backward_flops for r in rows) / len(rows)]
    untracked: Dict[str, int] = {}
    for count in counts:
        for name, calls in count.untracked.items():
            untracked[name] = untracked.get(name, 0) + calls
    by_precision: Dict[str, int] = {}
    for i in order:
        for precision, macs in counts[i].macs_by_precision.items():
            by_precision[precision] = by_precision.get(precision, 0) + macs
    return FlopsPayload(per_step=per_step, macs_per_step=[counts[i].total_macs for i in order],
                        macs_by_precision=by_precision, forward_per_step=[counts[i].flops for i in order],
                        modules=modules, untracked=untracked, conventions=counts[0].conventions)


def params_extra(modules: torch.nn.Module, labels: List[str]) -> Dict[str, Any]:
    """Parameter counts: totals, bytes per dtype, shared tensors; rows of the Brain's modules and of ``labels``.

    A row's ``depth`` is its nesting among the rows kept (as in the time table).
    """
    from sbprof.measuring.modules.result import nesting_depth
    from sbprof.measuring.params import count_params

    data = count_params(modules).to_dict()
    rows = [row for row in data["modules"] if row["depth"] == 1 or row["name"] in set(labels)]
    depth = nesting_depth([row["name"] for row in rows])
    data["modules"] = [{**row, "depth": depth[row["name"]]} for row in rows]
    return data


def measure_variant(cfg: TrainConfig, cell: Cell, modules: Dict[str, torch.nn.Module], data: MockBatches,
                    folder: Path) -> Measurement:
    """Train one variant on one setting and measure it (see the module docstring)."""
    from torch.utils.data import DataLoader

    from sbprof.decorators import export, profile
    from sbprof.train.brains import BRAINS

    variant, device = cell.model, cell.device
    torch.manual_seed(cfg.preamble.seed)
    n, warmup = cfg.preamble.warmup + cfg.preamble.measured, cfg.preamble.warmup
    order = [i % len(data.batches) for i in range(n)]
    brain = _with_losses(BRAINS[variant])(modules, functools.partial(torch.optim.Adam, lr=cfg.learning_rate),
                                          run_opts={"device": device, "noprogressbar": True,
                                                    "precision": cfg.precision})

    brain = profile(brain, activities=(), modules=cfg.profiling.modules)  # the one profiling change
    brain.fit(range(1), DataLoader([data.batches[i] for i in order], batch_size=None))
    losses = list(brain.step_losses[:n])  # the timed fit's steps only (the memory and trace steps come later)

    timing = brain.profiler.measurement("train")
    attribution = brain.profiler.modules
    measured = order[warmup:]
    longest = max(range(len(data.batches)), key=data.audio_s.__getitem__)
    memory = step_peak(brain, data.batches[longest], device)
    if cfg.profiling.memory:
        attribution.measure_memory(lambda: _plain_step(brain, data.batches[longest]))
    breakdown = attribution.breakdown("train", skip_first=warmup)
    params = ParamCount.from_dict(params_extra(brain.modules, [r.label for r in breakdown.rows]))
    extra = TrainPayload(
        audio_s_per_step=[data.audio_s[i] for i in measured], tokens_per_step=[data.tokens[i] for i in measured],
        batch_of_step=measured, memory_step_batch=longest, modules=breakdown, precision=cfg.precision,
        loss_per_step=losses, params=params, loadavg_1m=os.getloadavg()[0])
    counts = Counts(params=params.total, trainable_params=params.trainable)
    if cfg.profiling.flops:
        per_batch = [step_flops(brain, batch) for batch in data.batches]
        flops = flops_extra(per_batch, measured, [r.label for r in breakdown.rows])
        extra = replace(extra, flops=flops)
        counts.flops = sum(flops.per_step) / len(measured)
        counts.macs = sum(flops.macs_per_step) / len(measured)
    if cfg.profiling.export_trace:
        trace_dir = folder / TRACE_DIR / f"{variant}-{setting_name(cell.device, cell.threads)}"
        brain = profile(brain, modules=cfg.profiling.modules, on_trace_ready=export(dir_name=str(trace_dir),
                                                                                     worker_name=variant))
        brain.fit(range(1), DataLoader(data.batches[:cfg.profiling.trace_steps], batch_size=None))
        extra = replace(extra, trace_files=sorted(str(p) for p in trace_dir.glob("*.json*")),
                        modules_detailed=brain.profiler.modules.breakdown("train"))
    cuda = breakdown.cuda_step_ms_samples
    return Measurement(
        label=f"train:{variant}", cell=cell, warmup=warmup, wall_s=timing.wall_s[warmup:],
        cpu_s=timing.cpu_s[warmup:], cuda_s=[ms / 1e3 for ms in cuda] if cuda else None, memory=memory,
        counts=counts, settings={"brain": type(brain).__name__, "optimizer": "Adam", "modules_mode": breakdown.mode,
                                 "learning_rate": cfg.learning_rate, "precision": cfg.precision},
        env=collect_env(), extra=extra.to_dict())


class TrainWorker(CellWorker):
    """Trains and measures the cells of one batch (each a variant on this worker's setting)."""

    def setup(self) -> Dict[str, Any]:
        self.cfg = TrainConfig.from_dict(self.job["config"])
        data = self.cfg.data
        self.data = mock_batches(data.num_batches, data.batch_size, data.scale, data.sample_rate,
                                 self.cfg.model.vocab_size, self.cfg.preamble.seed)
        return {}

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        cell = Cell.from_dict(item["cell"])
        modules = build_modules(cell.model, self.cfg.model, self.cfg.data.sample_rate, self.cfg.preamble.seed)
        return measure_variant(self.cfg, cell, modules, self.data, Path(self.cfg.preamble.output_folder)).to_dict()

    def release(self) -> None:
        release_memory(self.job["device"])


if __name__ == "__main__":
    sys.exit(serve_cells(TrainWorker))
