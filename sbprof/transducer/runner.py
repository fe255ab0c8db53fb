"""Runs the benchmark: each backend's items in worker processes (:mod:`sbprof.workers`), under its interpreter.

The parent draws the shapes and batches, finds which records are still
missing from ``results.json`` (a finished backend is not measured again),
and sends each backend's worker (:mod:`sbprof.transducer.worker`) its items
through :class:`~sbprof.workers.supervisor.Supervisor`: the agreement check,
one measured schedule per batching mode, optionally the memory search. Each
plain record the worker sends back becomes a :class:`~sbprof.record.Measurement`
saved at once (:class:`~sbprof.results.ResultStore`). A worker that dies
inside an item (segfault, OOM killer) leaves that item's record as an error,
and a fresh worker takes the rest. The caller holds the output folder's
lock and renders (the runner never renders).
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from sbprof.env import collect_env
from sbprof.errors import ConfigError, MeasurementError
from sbprof.record import Cell, Env, Measurement, MemoryPeak
from sbprof.results.files import prepare_output_folder
from sbprof.results.store import MACHINE_KEYS, Results, ResultStore
from sbprof.transducer.backends import get_backend
from sbprof.transducer.batching import Batch, bucket_batches, fixed_batches, padding_summary
from sbprof.transducer.check import TOLERANCES
from sbprof.transducer.config import TransducerConfig
from sbprof.transducer.shapes import load_shapes
from sbprof.workers.supervisor import Supervisor, WorkerJob

JOB = "transducer"
"""The ``job`` of a transducer benchmark's ``results.json``."""
LOG_DIR = "logs"
TRACE_DIR = "traces"
FAILED = ("oom", "error")
WORKER = "sbprof.transducer.worker"


def transducer_results(cfg: TransducerConfig) -> Results:
    """What this run measures under: the rules shared by every record, each backend's interpreter, this machine.

    Device, threads and batching are coordinates of each record (its
    :class:`~sbprof.record.Cell`), so runs that differ only there share a file.
    """
    env = collect_env()
    rules = {"vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim, "blank": cfg.blank,
             "shapes": cfg.shapes.to_dict(), "schedule": dict(cfg.schedule), "seed": cfg.seed,
             "tolerances": dict(TOLERANCES)}
    models = {name: {"interpreter": cfg.interpreters.get(name) or sys.executable,
                     "options": dict(cfg.backend_options.get(name, {}))} for name in cfg.backends}
    return Results(job=JOB, rules=rules, models=models, machine={k: getattr(env, k) for k in MACHINE_KEYS})


def make_batches(cfg: TransducerConfig, shapes: Sequence[Any]) -> Dict[str, List[Batch]]:
    """The batches of every configured batching mode."""
    modes: Dict[str, List[Batch]] = {}
    if cfg.batch_size is not None:
        modes["fixed"] = fixed_batches(shapes, cfg.batch_size, cfg.seed)
    if cfg.max_frames is not None:
        modes["max_frames"] = bucket_batches(shapes, cfg.max_frames, cfg.seed)
    return modes


def step_batches(batches: Sequence[Batch], count: int) -> List[Batch]:
    """The batches of ``count`` consecutive steps (cycling when there are fewer)."""
    return [batches[i % len(batches)] for i in range(count)]


def mode_cell(cfg: TransducerConfig, backend: str, mode: str) -> Cell:
    """Where one backend's schedule in one batching mode (``fixed`` or ``max_frames``) sits."""
    params: Dict[str, Any] = {"mode": mode}
    if mode == "max_frames":
        params["max_frames"] = cfg.max_frames
    return Cell(model=backend, device=cfg.device, threads=cfg.threads,
                batch_size=cfg.batch_size if mode == "fixed" else None, input=f"random:seed={cfg.seed}",
                params=params)


def search_cell(cfg: TransducerConfig, backend: str) -> Cell:
    """Where one backend's largest-batch search sits (its parameters are coordinates)."""
    search = cfg.search
    params = {"mode": "search", "searched": search.mode, "budget_bytes": search.budget_bytes, "start": search.start,
              "limit": search.limit, "step": search.step, "probe_batches": search.probe_batches}
    return Cell(model=backend, device=cfg.device, threads=cfg.threads, input=f"random:seed={cfg.seed}",
                params=params)


class BackendRun:
    """One backend: which of its records are missing, the worker items that make them, the records.

    Arguments
    ---------
    cfg : TransducerConfig
    name : str
        The backend.
    modes : dict
        Batching mode -> its batches.
    shapes : list
        Every utterance's ``(T, U)`` (the search draws its own batches).
    """

    def __init__(self, cfg: TransducerConfig, name: str, modes: Dict[str, List[Batch]], shapes: Sequence[Any]):
        self.cfg = cfg
        self.name = name
        self.backend = get_backend(name)
        self.python = cfg.interpreters.get(name) or sys.executable
        self.shapes = shapes
        self.steps = {mode: step_batches(b, cfg.schedule_steps) for mode, b in modes.items()}
        self.env: Optional[Env] = None
        # Until a worker says otherwise: this interpreter's versions, or unknown for another one.
        self.runtime: Dict[str, str] = ({"python": platform.python_version(), "torch": torch.__version__}
                                        if self.python == sys.executable else {})
        self.agreement: Optional[Dict[str, Any]] = None
        self.not_installed: Optional[str] = None

    def cells(self) -> List[Cell]:
        """Every record this backend has in a complete run."""
        cells = [mode_cell(self.cfg, self.name, mode) for mode in self.steps]
        if self.cfg.search is not None and self.name in self.cfg.search.backends:
            cells.append(search_cell(self.cfg, self.name))
        return cells

    def todo(self, store: ResultStore) -> List[Cell]:
        """The cells without a record (or, with ``retry_failed``, with a failed or not-installed one)."""
        def wanted(stored: Optional[Measurement]) -> bool:
            return stored is None or (self.cfg.retry_failed and (
                stored.status in FAILED or bool(stored.extra.get("not_installed"))))

        return [cell for cell in self.cells() if wanted(store.get(cell))]

    def settings(self) -> Dict[str, Any]:
        cfg = self.cfg
        return {"vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim, "blank": cfg.blank,
                "shape_source": cfg.shapes.source, "scale": cfg.shapes.scale, "schedule": dict(cfg.schedule),
                "seed": cfg.seed, "options": dict(cfg.backend_options.get(self.name, {})),
                "interpreter": self.python, **self.runtime}

    def record(self, cell: Cell, status: str, message: str = "", **extra: Any) -> Measurement:
        return Measurement(label=self.name, cell=cell, status=status, message=message,
                           warmup=self.cfg.unmeasured_steps, settings=self.settings(), env=self.env,
                           extra=dict(extra, install_hint=self.backend.install_hint))

    def skipped_not_installed(self, cell: Cell, reason: str) -> Measurement:
        return self.record(cell, "skipped", f"not installed: {reason}", not_installed=True)

    def item(self, cell: Cell) -> Dict[str, Any]:
        """The worker's item that makes ``cell``'s record."""
        cfg = self.cfg
        mode = cell.params["mode"]
        if mode == "search":
            search = cfg.search
            return {"kind": "search", "mode": search.mode, "shapes": [list(s) for s in self.shapes],
                    "seed": cfg.seed, "budget_bytes": search.budget_bytes, "start": search.start,
                    "limit": search.limit, "step": search.step, "probe_batches": search.probe_batches}
        trace = (str(Path(cfg.output_folder) / TRACE_DIR / f"{self.name}-{mode}.pt.trace.json")
                 if cfg.export_trace else None)
        return {"kind": "measure", "unmeasured": cfg.unmeasured_steps,
                "steps": [list(b.shapes) for b in self.steps[mode]], "trace_path": trace}

    def worker_job(self, items: List[Dict[str, Any]]) -> WorkerJob:
        cfg = self.cfg
        threads = str(cfg.threads)
        # Native libraries size their own pools from these at load time.
        env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads}
        if cfg.device == "cpu":
            env.update(self.backend.env)
        payload = {"backend": self.name, "options": cfg.backend_options.get(self.name, {}), "device": cfg.device,
                   "threads": cfg.threads, "vocab_size": cfg.vocab_size, "joiner_dim": cfg.joiner_dim,
                   "blank": cfg.blank, "seed": cfg.seed, "cells": items}
        return WorkerJob(module=WORKER, payload=payload, n_items=len(items), name=f"{self.name} worker",
                         log_path=Path(cfg.output_folder) / LOG_DIR / f"{self.name}.log", python=self.python,
                         env=env)

    def run(self, cells: List[Cell], on_record: Callable[[Measurement], None]) -> None:
        """Make the records of ``cells`` (from :meth:`todo`), handing each to ``on_record`` as it is made."""
        reason = self._unavailable_here()
        if reason is not None:
            for cell in cells:
                on_record(self.skipped_not_installed(cell, reason))
            return
        unsupported = self.backend.unsupported_reason(self.cfg.device)
        measured = [] if unsupported is not None else cells
        check = self.cfg.device.split(":")[0] in self.backend.check_devices
        items = ([{"kind": "check"}] if check else []) + [self.item(cell) for cell in measured]
        item_cells: List[Optional[Cell]] = ([None] if check else []) + list(measured)
        done: List[Cell] = []

        def finished(m: Measurement) -> None:
            done.append(m.cell)
            on_record(m)

        def on_result(index: int, payload: Dict[str, Any]) -> None:
            cell = item_cells[index]
            if payload.get("not_installed"):
                self.not_installed = payload["message"]
            if cell is None:
                self.agreement = payload.get("agreement") or (
                    None if self.not_installed else {"ok": False, "message": payload["message"]})
            elif self.not_installed:
                finished(self.skipped_not_installed(cell, self.not_installed))
            else:
                finished(self.measurement(cell, payload))

        def on_crash(index: int, message: str) -> None:
            cell = item_cells[index]
            if cell is None:
                self.agreement = {"ok": False, "message": f"the check crashed: {message}"}
            else:
                finished(self.record(cell, "error", message, agreement=self.agreement))

        def on_loaded(event: Dict[str, Any]) -> None:
            self.env = Env.from_dict(event["env"])
            self.runtime = {"python": event["python"], "torch": event["torch"]}

        try:
            Supervisor(self.worker_job(items), on_result, on_crash, on_loaded).run()
        except (ConfigError, MeasurementError) as exc:  # this backend's worker could not run: its rows say why
            for cell in cells:
                if cell not in done:
                    finished(self.record(cell, "error", str(exc), agreement=self.agreement))
        for cell in cells:
            if cell not in done:  # only on a device this backend does not support: skipped, with the check's verdict
                finished(self.skipped_not_installed(cell, self.not_installed) if self.not_installed
                         else self.record(cell, "skipped", str(unsupported), agreement=self.agreement))

    def _unavailable_here(self) -> Optional[str]:
        """Why no worker need start (library missing in this interpreter, interpreter missing), or ``None``."""
        if self.python == sys.executable and self.backend.in_process:
            ok, reason = self.backend.available()
            return None if ok else reason
        if not os.access(self.python, os.X_OK):
            return f"interpreter {self.python} not found (prepare it; see the README)"
        return None

    def measurement(self, cell: Cell, rec: Dict[str, Any]) -> Measurement:
        """A record from the worker's plain one (a measured schedule or a search)."""
        if cell.params["mode"] == "search":
            return self.record(cell, rec["status"], rec["message"], agreement=self.agreement, search=rec.get("search"))
        measured = self.steps[cell.params["mode"]][self.cfg.unmeasured_steps:]
        extra: Dict[str, Any] = {"agreement": self.agreement, "padding": padding_summary(measured),
                                 "step_shapes": [[b.size, b.t_max, b.u_max] for b in measured],
                                 "executable": rec.get("executable"), "worker_threads": rec.get("threads"),
                                 "loadavg_1m": rec.get("loadavg_1m")}
        if rec.get("trace"):
            # Relative to the output folder, so the folder can be moved whole.
            extra["trace"] = os.path.relpath(rec["trace"], self.cfg.output_folder)
        m = self.record(cell, rec["status"], rec["message"], **extra)
        m.wall_s = list(rec.get("wall_s", []))
        m.cpu_s = list(rec.get("cpu_s", []))
        if rec.get("memory"):
            m.memory = MemoryPeak.from_dict(rec["memory"])
        return m


def _statuses(records: Sequence[Measurement]) -> str:
    return ", ".join(f"{m.cell.params.get('mode')} {m.status}" for m in records)


def run_benchmark(cfg: TransducerConfig, log: Callable[[str], None] = print,
                  on_progress: Optional[Callable[[Results], None]] = None) -> Results:
    """Check and measure every configured backend whose records are missing from ``results.json``.

    The output folder is made if needed (:func:`sbprof.results.prepare_output_folder`);
    the caller holds its lock (:class:`sbprof.results.FolderLock`) where
    other runs could write there too.

    Arguments
    ---------
    cfg : TransducerConfig
        A validated configuration (:func:`sbprof.transducer.config.load_config`).
    log : callable
        Receives one line per backend as it finishes (or is found already done).
    on_progress : callable, optional
        Called with the results after each backend, and when the run stops
        early (e.g. to render reports).

    Returns
    -------
    Results
        Everything in ``results.json`` now.
    """
    shapes = load_shapes(**cfg.shapes.to_dict())
    modes = make_batches(cfg, shapes)  # bad batching input stops here, before any file is written
    store = ResultStore(prepare_output_folder(cfg.output_folder), transducer_results(cfg))
    store.reserve.require()
    try:
        for name in cfg.backends:
            run = BackendRun(cfg, name, modes, shapes)
            cells = run.todo(store)
            if not cells:
                log(f"{name}: already in {store.path}")
                continue
            made: List[Measurement] = []

            def save(m: Measurement) -> None:
                store.add(m)
                made.append(m)

            run.run(cells, save)
            log(f"{name}: {_statuses(made)}")
            if on_progress is not None:
                on_progress(store.snapshot())
    finally:
        store.reserve.release()
        # Also after an interruption: the tables show what was measured so far.
        if on_progress is not None and store.records():
            on_progress(store.snapshot())
    return store.snapshot()

