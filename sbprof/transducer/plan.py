"""The plan of the transducer-loss benchmark: each backend's cells in worker processes, under its interpreter.

The parent draws the shapes and batches and sends each backend's worker
(:mod:`sbprof.transducer.worker`), per setting, one item per batching mode
(its steps) and optionally the memory search; the one runner
(:mod:`sbprof.jobs.runner`) saves each record as it comes, resumes, and
records a worker that dies inside an item (segfault, OOM killer) as that
item's error while a fresh worker takes the rest.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from sbprof.analysis.transducer import TransducerPayload
from sbprof.jobs.plan import Batch as WorkerBatch
from sbprof.jobs.plan import (Group, Item, JobPlan, Records, Step, StoreView, interleaved_passes, log_name,
                              needs_measuring, repeat_policy, worker_env)
from sbprof.jobs.preamble import Setting
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results
from sbprof.transducer.backends import get_backend
from sbprof.transducer.batching import Batch, bucket_batches, fixed_batches, padding_summary
from sbprof.transducer.check import TOLERANCES
from sbprof.transducer.config import TransducerConfig
from sbprof.transducer.shapes import load_shapes
from sbprof.transducer import JOB

"""The ``job`` of a transducer benchmark's ``results.json``."""
TRACE_DIR = "traces"


def make_batches(cfg: TransducerConfig, shapes: Sequence[Any]) -> Dict[str, List[Batch]]:
    """The batches of every configured batching mode."""
    modes: Dict[str, List[Batch]] = {}
    if cfg.batch_size is not None:
        modes["fixed"] = fixed_batches(shapes, cfg.batch_size, cfg.preamble.seed)
    if cfg.max_frames is not None:
        modes["max_frames"] = bucket_batches(shapes, cfg.max_frames, cfg.preamble.seed)
    return modes


def step_batches(batches: Sequence[Batch], count: int) -> List[Batch]:
    """The batches of ``count`` consecutive steps (cycling when there are fewer)."""
    return [batches[i % len(batches)] for i in range(count)]


def mode_cell(cfg: TransducerConfig, setting: Setting, backend: str, mode: str) -> Cell:
    """Where one backend's schedule in one batching mode (``fixed`` or ``max_frames``) sits."""
    params: Dict[str, Any] = {"mode": mode}
    if mode == "max_frames":
        params["max_frames"] = cfg.max_frames
    return Cell(model=backend, device=setting.device, threads=setting.threads,
                batch_size=cfg.batch_size if mode == "fixed" else None, input=f"random:seed={cfg.preamble.seed}",
                params=params)


def search_cell(cfg: TransducerConfig, setting: Setting, backend: str) -> Cell:
    """Where one backend's largest-batch search sits (its parameters are coordinates)."""
    search = cfg.search
    params = {"mode": "search", "searched": search.mode, "budget_bytes": search.budget_bytes, "start": search.start,
              "limit": search.limit, "step": search.step, "probe_batches": search.probe_batches}
    return Cell(model=backend, device=setting.device, threads=setting.threads, input=f"random:seed={cfg.preamble.seed}",
                params=params)


class Plan(JobPlan):
    """The benchmark's plan: per setting and backend, its batching modes (and search) as cells of one worker.

    The shapes and batches are drawn here, before anything is written, so a
    batching that cannot be made is bad input. A backend that cannot start
    here (its library missing from this interpreter, or its interpreter
    missing) needs no worker: its records say "not installed", and
    ``--retry_failed`` measures them once it is.
    """

    job, worker = JOB.name, "sbprof.transducer.worker"  # the name its Job gives

    def __init__(self, cfg: TransducerConfig):
        super().__init__(cfg)
        self.shapes = load_shapes(**cfg.shapes.to_dict())
        self.steps_of = {mode: step_batches(b, cfg.steps) for mode, b in make_batches(cfg, self.shapes).items()}

    def header(self) -> Results:
        """The rules shared by every record, each backend's interpreter, this machine.

        Device, threads and batching are coordinates of each record (its
        :class:`~sbprof.record.Cell`), so runs that differ only there share a file.
        """
        cfg = self.cfg
        rules = {"vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim, "blank": cfg.blank,
                 "shapes": cfg.shapes.to_dict(), "warmup": self.pre.warmup, "measured": self.pre.measured,
                 "seed": self.pre.seed, "tolerances": dict(TOLERANCES)}
        return self.results(rules, {name: {"interpreter": cfg.interpreters.get(name) or sys.executable,
                                           "options": dict(cfg.backend_options.get(name, {}))}
                                    for name in cfg.backends})

    def cells(self, setting: Setting, backend: str) -> List[Cell]:
        """Every record one backend has on one setting in a complete run."""
        cells = [mode_cell(self.cfg, setting, backend, mode) for mode in self.steps_of]
        if self.cfg.search is not None and backend in self.cfg.search.backends:
            cells.append(search_cell(self.cfg, setting, backend))
        return cells

    def expected(self) -> int:
        return self.pre.repeats.first_pass * sum(len(self.cells(s, b)) for s in self.pre.settings
                                                  for b in self.cfg.backends)

    def settings(self, backend: str) -> Dict[str, Any]:
        cfg = self.cfg
        return {"vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim, "blank": cfg.blank,
                "shape_source": cfg.shapes.source, "scale": cfg.shapes.scale, "warmup": self.pre.warmup,
                "measured": self.pre.measured, "seed": self.pre.seed,
                "options": dict(cfg.backend_options.get(backend, {})),
                "interpreter": cfg.interpreters.get(backend) or sys.executable}

    def item(self, cell: Cell, backend: str) -> Item:
        """The worker's item that makes ``cell``'s record."""
        cfg = self.cfg
        mode = cell.params["mode"]
        payload: Dict[str, Any] = {"settings": self.settings(backend), "kind": "search" if mode == "search" else
                                   "measure", "unmeasured": self.pre.warmup}
        if mode == "search":
            search = cfg.search
            payload.update(mode=search.mode, shapes=[list(s) for s in self.shapes], seed=self.pre.seed,
                           budget_bytes=search.budget_bytes, start=search.start, limit=search.limit,
                           step=search.step, probe_batches=search.probe_batches)
        else:
            steps = self.steps_of[mode]
            measured = steps[self.pre.warmup:]
            payload.update(steps=[list(b.shapes) for b in steps], padding=padding_summary(measured),
                           step_shapes=[[b.size, b.t_max, b.u_max] for b in measured],
                           trace_path=str(Path(self.pre.output_folder) / TRACE_DIR / f"{backend}-{cell.device}-{mode}"
                                          f".pt.trace.json") if cfg.export_trace else None)
        return Item(cell, backend, payload)

    def batch(self, setting: Setting, backend: str, cells: List[Cell]) -> WorkerBatch:
        cfg = self.cfg
        # Native libraries size their own pools from these at load time.
        env = worker_env(setting.threads, NUMBA_NUM_THREADS=str(setting.threads))
        if setting.device == "cpu":
            env.update(get_backend(backend).env)
        payload = {"backend": backend, "options": cfg.backend_options.get(backend, {}), "device": setting.device,
                   "threads": setting.threads, "vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim,
                   "blank": cfg.blank, "seed": self.pre.seed, "output_folder": self.pre.output_folder}
        return WorkerBatch(name=f"{backend} worker on {setting.name}", module=self.worker, payload=payload,
                           items=[self.item(c, backend) for c in cells], log=log_name(backend),
                           python=cfg.interpreters.get(backend) or sys.executable, env=env)

    def not_installed(self, cell: Cell, backend: str, reason: str) -> Measurement:
        return Measurement(label=backend, cell=cell, status="skipped", message=f"not installed: {reason}",
                           warmup=self.pre.warmup, settings=self.settings(backend),
                           extra=TransducerPayload(not_installed=True, retryable=True,
                                                   install_hint=get_backend(backend).install_hint).to_dict())

    def steps(self, view: StoreView) -> Iterator[Step]:
        missing: List[Measurement] = []
        groups = []
        for setting in self.pre.settings:
            for backend in self.cfg.backends:
                cells = self.cells(setting, backend)
                reason = self.unavailable_here(backend)
                if reason is None:
                    groups.append(Group(cells, lambda chosen, s=setting, b=backend: self.batch(s, b, chosen)))
                else:
                    missing += [self.not_installed(c, backend, reason) for c in cells if needs_measuring(view, c)]
        if missing:
            yield Records(missing, replace=True)
        yield from interleaved_passes(view, lambda: groups, repeat_policy(self.pre.repeats), self.pre.seed)

    def unavailable_here(self, backend: str) -> Optional[str]:
        """Why no worker need start (library missing in this interpreter, interpreter missing), or ``None``."""
        python = self.cfg.interpreters.get(backend) or sys.executable
        adapter = get_backend(backend)
        if python == sys.executable and adapter.in_process:
            ok, reason = adapter.available()
            return None if ok else reason
        if not os.access(python, os.X_OK):
            return f"interpreter {python} not found (prepare it; see docs/transducer.md, 'Other interpreters')"
        return None
