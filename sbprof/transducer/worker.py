"""The worker process that checks and measures one backend (see :mod:`sbprof.workers.cells`).

Started by the runner as ``python -m sbprof.transducer.worker RESULT_FD``,
where ``python`` may be another interpreter (e.g. Python 3.9 + torch 1.13 +
k2), so this module needs only the standard library, torch, the backend's
library and light sbprof modules (the record, memory, env, the worker
loop). Setting up, it checks the backend's agreement with the plain-PyTorch
reference on small random batches (where the device allows the check);
then each item becomes one :class:`~sbprof.record.Measurement`, the
agreement in its ``extra``:

- ``measure``: the steps of one batching mode, ``warmup`` unmeasured, then
  ``measured`` ones timed; a step is fresh random inputs of its shapes
  (untimed), then the joiner, the loss and its backward pass, timed between
  device synchronisations; peak memory covers the measured steps (on CUDA the
  caching allocator's peak; on CPU the resident high-water mark of
  :class:`~sbprof.measuring.memory.CpuPeak`, which hands freed heap back to the system
  first, so the figure is what the steps add, not what earlier steps left);
- ``search``: the largest batch under a memory budget.

A backend whose library does not import here makes ``skipped`` records
marked "not installed" (measured again with ``--retry_failed``); one that
cannot run on the device, ``skipped`` records saying why (with the check's
verdict).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from sbprof.analysis.transducer import Agreement, Padding, SearchPayload, TransducerPayload
from sbprof.measuring.env import collect_env
from sbprof.base.errors import ConfigError, failure_status
from sbprof.measuring.memory import CpuPeak, CudaPeak, release_heap
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.transducer.backends import get_backend
from sbprof.transducer.backends.base import Backend
from sbprof.transducer.batching import bucket_batches, fixed_batches
from sbprof.transducer.check import check_backend
from sbprof.transducer.inputs import JointModel, make_batch
from sbprof.transducer.search import search_largest
from sbprof.workers.cells import CellWorker, serve_cells
from sbprof.workers.protocol import one_line

Shape = Tuple[int, int]


class Stepper:
    """Runs benchmark steps of one backend on one device."""

    def __init__(self, backend: Backend, device: str, vocab_size: int, joiner_dim: int, blank: int, seed: int):
        self.backend = backend
        self.device = device
        self.vocab_size = vocab_size
        self.blank = blank
        self.generator = torch.Generator().manual_seed(seed)
        self.model = JointModel(joiner_dim, vocab_size).to(device)
        self.cuda = device.startswith("cuda")

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def step(self, shapes: Sequence[Shape]) -> Tuple[float, float]:
        """One step; returns its ``(wall_s, cpu_s)`` (input creation excluded)."""
        batch = make_batch(shapes, self.model, self.vocab_size, self.blank, self.generator, self.device)
        self.sync()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        self.backend.train_loss(batch).sum().backward()
        self.sync()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        self.model.zero_grad(set_to_none=True)
        return wall, cpu

    def peak_tracker(self) -> Any:
        """A started peak tracker for the region that follows (CUDA allocator or CPU RSS)."""
        if self.cuda:
            torch.cuda.empty_cache()
            tracker: Any = CudaPeak(self.device)
        else:
            tracker = CpuPeak()  # its start() hands freed heap back first
        tracker.start()
        return tracker

    def read_peak(self, tracker: Any) -> Dict[str, Any]:
        if self.cuda:
            peak, delta, reserved = tracker.stop()
            return {"peak_cuda_bytes": peak, "peak_cuda_delta_bytes": delta, "peak_cuda_reserved_bytes": reserved}
        peak, delta = tracker.stop()
        return {"peak_rss_bytes": peak, "peak_rss_delta_bytes": delta, "rss_method": tracker.method,
                "heap_trim": tracker.heap_trim}

    def release(self) -> None:
        """Hand freed memory back, so one item's leftovers do not inflate the next item's peak."""
        self.model.zero_grad(set_to_none=True)
        release_heap()
        if self.cuda:
            torch.cuda.empty_cache()

    def added_bytes(self, peaks: Dict[str, Any]) -> int:
        return peaks["peak_cuda_delta_bytes"] if self.cuda else peaks["peak_rss_delta_bytes"]

    def measure(self, steps: Sequence[Sequence[Shape]], unmeasured: int, trace_path: Optional[str]) -> Dict[str, Any]:
        """The schedule: ``unmeasured`` steps, then the rest measured; peaks over the measured ones."""
        for shapes in steps[:unmeasured]:
            self.step(shapes)
        wall: List[float] = []
        cpu: List[float] = []
        tracker = self.peak_tracker()
        for shapes in steps[unmeasured:]:
            w, c = self.step(shapes)
            wall.append(w)
            cpu.append(c)
        record: Dict[str, Any] = {"wall_s": wall, "cpu_s": cpu, "memory": self.read_peak(tracker)}
        if trace_path:
            record["trace"] = self.export_trace(steps[-1], trace_path)
        return record

    def export_trace(self, shapes: Sequence[Shape], path: str) -> str:
        """One more step under torch.profiler, after the measured ones; a Chrome/Perfetto trace."""
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
            self.step(shapes)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(path)
        return path

    def probe_peak(self, batches: Sequence[Sequence[Shape]]) -> Optional[int]:
        """Added memory of one step over each batch (the largest); ``None`` on out-of-memory."""
        try:
            tracker = self.peak_tracker()
            for shapes in batches:
                self.step(shapes)
            return self.added_bytes(self.read_peak(tracker))
        except Exception as exc:
            if failure_status(exc) != "oom":
                raise
            self.release()
            return None


def heaviest(batches: Sequence[Any], count: int) -> List[List[Shape]]:
    """The ``count`` batches with the largest padded lattice (they decide the peak)."""
    ranked = sorted(batches, key=lambda b: b.padded_lattice_cells, reverse=True)
    return [list(b.shapes) for b in ranked[:count]]


def run_search(stepper: Stepper, cell: Dict[str, Any]) -> Dict[str, Any]:
    """Largest batch size / max frames whose heaviest batches fit the budget."""
    shapes = [tuple(s) for s in cell["shapes"]]
    mode, seed = cell["mode"], cell["seed"]
    # Warm the backend (imports, JIT) so the first probe measures the step, not the library's start.
    stepper.step(shapes[:1])

    def probe(value: int) -> Optional[int]:
        batches = fixed_batches(shapes, value, seed) if mode == "batch_size" else bucket_batches(shapes, value, seed)
        return stepper.probe_peak(heaviest(batches, cell["probe_batches"]))

    result = search_largest(probe, cell["budget_bytes"], cell["start"], cell["limit"], cell["step"])
    return {"largest": result.largest, "capped": result.capped,
            "probes": [list(p) for p in result.probes], "budget_bytes": cell["budget_bytes"]}


class TransducerWorker(CellWorker):
    """Checks one backend on one device, then measures its items (see the module docstring)."""

    def setup(self) -> Dict[str, Any]:
        job = self.job
        try:
            self.backend: Backend = get_backend(job["backend"]).configured(job.get("options") or {})
        except (KeyError, ValueError) as exc:
            raise ConfigError(one_line(exc)) from None
        self.device = job["device"]
        available, self.unavailable = self.backend.available()
        self.env = collect_env()
        self.runtime = {"python": sys.version.split()[0], "torch": torch.__version__}
        self.extra = TransducerPayload(executable=sys.executable, worker_threads=torch.get_num_threads(),
                                       install_hint=self.backend.install_hint)
        self.agreement: Optional[Dict[str, Any]] = None
        if not available:
            return {"available": False, "reason": self.unavailable, **self.runtime, "extra": self.extra.to_dict()}
        self.unsupported = self.backend.unsupported_reason(self.device)
        if self.device.split(":")[0] in self.backend.check_devices:
            try:
                self.agreement = check_backend(self.backend, job["vocab_size"], job["blank"], job["seed"],
                                               self.device)
            except Exception as exc:  # a backend that fails the check is shown so, not ranked
                self.agreement = {"ok": False, "message": one_line(exc)}
        self.stepper = Stepper(self.backend, self.device, job["vocab_size"], job["joiner_dim"], job["blank"],
                               job["seed"])
        return {"available": True, **self.runtime, "extra": self.payload().to_dict()}

    def payload(self, **extra: Any) -> TransducerPayload:
        """The record's ``extra``: the worker's, its backend's check against the reference, and ``extra``."""
        agreement = None if self.agreement is None else Agreement.from_dict(self.agreement)
        return replace(self.extra, agreement=agreement, **extra)

    def record(self, item: Dict[str, Any], status: str = "ok", message: str = "", **extra: Any) -> Measurement:
        return Measurement(label=self.backend.name, cell=Cell.from_dict(item["cell"]), status=status, message=message,
                           warmup=item.get("unmeasured", 0), settings={**item["settings"], **self.runtime},
                           env=self.env, extra=self.payload(**extra).to_dict())

    def measure(self, item: Dict[str, Any]) -> Dict[str, Any]:
        if self.unavailable:
            # "not installed" here: kept, and measured again with --retry_failed once it is
            return self.record(item, "skipped", f"not installed: {self.unavailable}", not_installed=True,
                               retryable=True).to_dict()
        if self.unsupported:
            return self.record(item, "skipped", self.unsupported).to_dict()
        load = {"loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
        if item["kind"] == "search":
            return self.record(item, search=SearchPayload.from_dict(run_search(self.stepper, item)), **load).to_dict()
        steps = [[tuple(s) for s in batch] for batch in item["steps"]]
        found = self.stepper.measure(steps, item["unmeasured"], item.get("trace_path"))
        extra: Dict[str, Any] = {"padding": Padding.from_dict(item["padding"]), "step_shapes": item["step_shapes"],
                                 **load}
        if found.get("trace"):
            # Relative to the output folder, so the folder can be moved whole.
            extra["trace"] = os.path.relpath(found["trace"], self.job["output_folder"])
        m = self.record(item, **extra)
        m.wall_s, m.cpu_s = found["wall_s"], found["cpu_s"]
        m.memory = MemoryPeak.from_dict(found["memory"])
        return m.to_dict()

    def failed(self, item: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
        return self.record(item, failure_status(exc), one_line(exc)).to_dict()

    def release(self) -> None:
        if not self.unavailable:
            self.stepper.release()


if __name__ == "__main__":
    sys.exit(serve_cells(TransducerWorker))
