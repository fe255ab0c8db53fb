"""Runs a sweep: worker processes per setting (see :mod:`sbprof.workers`), results saved after every cell.

For each (device, thread count) setting, the cells still missing from
``results.json`` go to a ``measure`` worker, each finished cell is stored at
once (atomically), and on CUDA settings or with ``export_logs`` a ``profile``
worker then adds its profiled figures. The caller holds the output folder's
lock and renders reports through ``on_progress`` (the runner never renders).
"""
from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tqdm import tqdm

from sbprof.analysis.intervals import RepeatPolicy
from sbprof.env import collect_env
from sbprof.figures import cell_figures
from sbprof.predictions import predict_cells
from sbprof.interfaces import resolve_interface
from sbprof.record import Cell, Measurement
from sbprof.results.store import MACHINE_KEYS, Results, ResultStore
from sbprof.runs import group_runs, noise_floor, rtf_over_runs
from sbprof.audio import input_kind
from sbprof.grid import cell_label, make_grid
from sbprof.sweep.schema import Setting, SweepConfig
from sbprof.workers.supervisor import Supervisor, WorkerJob

LOG_DIR = "logs"
TRACE_DIR = "traces"
FAILED = ("oom", "error")
NOISE_FLOOR_RUNS = 4
"""Fresh processes that time the calibration workload at the start of a run."""


def summarise_sweep(results: Results) -> Dict[str, Any]:
    """The ``summary`` block of a sweep's results.json, derived from the records (never read back as data).

    ``rtf``: per cell measured in several runs, the RTF over runs with both
    intervals (next-run and the median's); ``predicted``: predicted cells,
    kept apart from measured ones.
    """
    over_runs = []
    for runs in group_runs(results.records).values():
        summary = rtf_over_runs(runs)
        if summary is not None and summary.interval.runs > 1:
            over_runs.append({"cell": runs[0].cell.to_dict(), **summary.to_dict()})
    return {"rtf": over_runs, "predicted": [p.to_dict() for p in predict_cells(results.records)]}


@dataclass
class SweepOutcome:
    """What a run did and where its results are.

    ``measured`` counts cells measured now (their first run), ``runs`` every
    run measured now (first and repeats), ``failed`` the cells that ended OOM
    or in error.
    """

    output_folder: Path
    results: Path
    measured: int = 0
    runs: int = 0
    resumed: int = 0
    skipped: int = 0
    skipped_predicted: int = 0
    failed: int = 0


def model_fingerprint(cfg: SweepConfig) -> str:
    """Identifies the build of the model: a local model's content hash, a folder's files, a hub id."""
    model = cfg.pretrained_model
    if model.kind == "local_model":
        from sbprof.models.build import content_hash

        return f"local:{content_hash(model.source)}"
    if model.kind == "folder":
        digest = hashlib.sha256()
        for path in sorted(Path(model.source).rglob("*")):
            if path.is_file():
                digest.update(f"{path.relative_to(model.source)}:{path.stat().st_size}\n".encode())
        digest.update((Path(model.source) / "hyperparams.yaml").read_bytes())
        return f"folder:{digest.hexdigest()[:16]}"
    return f"hub:{model.source}"


def sweep_results(cfg: SweepConfig) -> Results:
    """What this sweep measures under: its rules, its model (with fingerprint) and this machine."""
    model = cfg.pretrained_model
    spec = resolve_interface(model.type, model.method, model.args)
    env = collect_env()
    return Results(
        job="sweep",
        rules={"input": input_kind(cfg.profiling_dimensions.example_audio, cfg.seed),
               "warmup_batches": cfg.warmup_batches, "measured_batches": cfg.measured_batches},
        models={model.source: {"kind": model.kind, "interface": model.type, "method": spec.method,
                               "args": list(spec.args), "fingerprint": model_fingerprint(cfg)}},
        machine={k: getattr(env, k) for k in MACHINE_KEYS},
    )


def cell_settings(cfg: SweepConfig) -> Dict[str, Any]:
    """How each cell is measured, beside its coordinates (the worker adds the sample rate)."""
    model = cfg.pretrained_model
    spec = resolve_interface(model.type, model.method, model.args)
    example = cfg.profiling_dimensions.example_audio
    return {"interface": model.type, "method": spec.method, "args": list(spec.args), "seed": cfg.seed,
            "example_audio": Path(example).name if example else None,
            "warmup_batches": cfg.warmup_batches, "measured_batches": cfg.measured_batches,
            "repeats": asdict(cfg.repeats), "predict": asdict(cfg.predict)}


class SettingRun:
    """The cells of one setting in ``measure`` or ``profile`` workers (see :mod:`sbprof.sweep.job`)."""

    def __init__(self, cfg: SweepConfig, setting: Setting, cells: List[Cell], settings: Dict[str, Any]):
        self.cfg = cfg
        self.setting = setting
        self.cells = cells
        self.settings = settings
        folder = Path(cfg.output_folder)
        self.log_path = folder / LOG_DIR / f"worker-{setting.name}.log"
        self.trace_dir = folder / TRACE_DIR / setting.name if cfg.profiling_dimensions.export_logs else None

    def job(self, mode: str) -> WorkerJob:
        payload = {
            "config": self.cfg.to_dict(), "device": self.setting.device, "threads": self.setting.threads,
            "mode": mode, "trace_dir": str(self.trace_dir) if self.trace_dir else None,
            "cells": [{"cell": c.to_dict(), "label": cell_label(c), "settings": self.settings} for c in self.cells],
        }
        # Native libraries size their own pools from these at load time.
        threads = str(self.setting.threads)
        return WorkerJob(module="sbprof.sweep.job", payload=payload, n_items=len(self.cells),
                         name=f"{mode} worker for {self.setting.name}", log_path=self.log_path,
                         env={"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})

    def measure(self, on_record: Callable[[Measurement], None], on_first_load: Callable[[], None],
                on_loaded: Callable[[Dict[str, Any]], None]) -> None:
        def crashed(index: int, message: str) -> None:
            cell = self.cells[index]
            on_record(Measurement(label=cell_label(cell), cell=cell, status="error", message=message,
                                  warmup=self.cfg.warmup_batches, settings=self.settings, env=collect_env()))

        def loaded(event: Dict[str, Any]) -> None:
            on_first_load()
            on_loaded(event)

        Supervisor(self.job("measure"), lambda i, payload: on_record(Measurement.from_dict(payload)),
                   crashed, on_loaded=loaded).run()

    def profile(self, on_extra: Callable[[Cell, Dict[str, Any]], None]) -> None:
        Supervisor(self.job("profile"), lambda i, payload: on_extra(self.cells[i], payload),
                   lambda i, message: on_extra(self.cells[i], {"profile_error": message})).run()


@dataclass
class Plan:
    """What a sweep still has to do, per setting: its base cells (run 0) and what is stored of them."""

    cells: Dict[Setting, List[Cell]]
    corner: Dict[Setting, List[Cell]]
    skipped_records: List[Measurement]
    resumed: int = 0
    skipped: int = 0


def plan(cfg: SweepConfig, store: ResultStore) -> Plan:
    """The cells to measure per setting (triangle cells first, then the corner), and the skipped records."""
    dims = cfg.profiling_dimensions
    input_name = input_kind(dims.example_audio, cfg.seed)
    settings = cell_settings(cfg)
    out = Plan(cells={}, corner={}, skipped_records=[])
    full = make_grid(dims.audio_mockup_secs, dims.batch_sizes, triangle_only=True)
    for setting in cfg.settings:
        out.cells[setting], out.corner[setting] = [], []
        for point in full:
            cell = Cell(model=cfg.pretrained_model.source, device=setting.device, threads=setting.threads,
                        audio_s=point.audio_s, batch_size=point.batch_size, input=input_name)
            stored = store.get(cell)
            if point.skipped and dims.triangle_only:
                out.skipped += 1
                if stored is None:
                    out.skipped_records.append(Measurement(
                        label=cell_label(cell), cell=cell, status="skipped", warmup=cfg.warmup_batches,
                        settings=settings, message="skipped by the triangle rule (triangle_only: True)"))
                continue
            if stored is not None and stored.status not in ("skipped",) + (FAILED if cfg.retry_failed else ()):
                out.resumed += 1
            (out.corner if point.skipped else out.cells)[setting].append(cell)
    return out


def runs_wanted(cfg: SweepConfig, store: ResultStore, cell: Cell, retried: set) -> Optional[Cell]:
    """The next run of ``cell`` to measure (its coordinates), or ``None`` when it has enough runs.

    ``retried`` holds the cells whose first run was measured again in this
    invocation (``--retry_failed`` retries a failed cell once, not forever).
    """
    first = store.get(cell)
    if first is None or first.status == "skipped" or (
            cfg.retry_failed and first.status in FAILED and cell.key() not in retried):
        return cell
    if not first.ok:
        return None  # a cell that fails is not repeated
    runs = []
    while True:
        m = store.get(replace(cell, run=len(runs)))
        if m is None or not m.ok:
            break
        runs.append(m)
    if not policy_of(cfg).decide(rtf_over_runs(runs).run_medians).add_run:
        return None
    return replace(cell, run=len(runs))


def policy_of(cfg: SweepConfig) -> RepeatPolicy:
    r = cfg.repeats
    if r.adaptive:
        return RepeatPolicy(target_rel=r.target, min_runs=r.min_runs, max_runs=r.max_runs, confidence=r.confidence)
    return RepeatPolicy.fixed(r.runs, confidence=r.confidence)


def over_budget(store: ResultStore, setting: Setting, corner: List[Cell], budget_bytes: float,
                settings: Dict[str, Any], cfg: SweepConfig) -> Tuple[List[Cell], List[Measurement]]:
    """Split the corner into cells to measure and cells predicted to exceed ``budget_bytes`` (skipped)."""
    predictions = {}
    for p in predict_cells(store.records() + [Measurement(label="", cell=c, status="skipped") for c in corner]):
        if p.figure == "peak_memory_bytes" and (p.device, p.threads) == (setting.device, setting.threads):
            predictions[(p.audio_s, p.batch_size)] = p
    keep, skipped = [], []
    for cell in corner:
        p = predictions.get(cell.grid_key)
        if p is not None and p.value > budget_bytes:
            skipped.append(Measurement(
                label=cell_label(cell), cell=cell, status="skipped", warmup=cfg.warmup_batches, settings=settings,
                message=f"predicted to need {p.value / 1e9:.2f} GB of peak memory, over the "
                        f"{budget_bytes / 1e9:.2f} GB budget (predict.skip_predicted_over)"))
        else:
            keep.append(cell)
    return keep, skipped


def measure_noise_floor(cfg: SweepConfig, store: ResultStore, runs: int = NOISE_FLOOR_RUNS) -> None:
    """The calibration workload in ``runs`` fresh processes, stored apart from the cells."""
    first = len(store.results.calibration)
    records: List[Measurement] = []
    for run in range(first, first + runs):
        job = WorkerJob(module="sbprof.sweep.job", payload={"mode": "calibrate", "threads": 1, "run": run},
                        n_items=1, name="noise-floor worker", log_path=Path(cfg.output_folder) / LOG_DIR /
                        "worker-noise-floor.log", env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        Supervisor(job, lambda i, payload: records.append(Measurement.from_dict(payload)),
                   lambda i, message: None).run()
    store.add_calibration(records)


def run_sweep(cfg: SweepConfig, log: Callable[[str], None] = print,
              on_progress: Optional[Callable[[Results], None]] = None) -> SweepOutcome:
    """Measure every missing cell (and run) of the sweep.

    The caller has checked the output folder and holds its lock
    (:func:`sbprof.results.prepare_output_folder`, :class:`sbprof.results.FolderLock`).
    Each pass measures, for every setting in turn, one more run of each cell
    that needs one (all cells first; then those whose run-to-run interval is
    still wider than the target, up to the cap), each setting in a fresh
    worker process, cells in a new order each pass: slow drift of the machine
    spreads over cells and settings instead of biasing some.

    Arguments
    ---------
    cfg : SweepConfig
        A validated configuration (``sbprof.sweep.config.load_config``).
    log : callable
        Receives one line per notable event (resumed cells, warnings, noise).
    on_progress : callable, optional
        Called with the results after each pass, and when the run stops
        (also early, e.g. to render reports).

    Returns
    -------
    SweepOutcome
    """
    folder = Path(cfg.output_folder)
    store = ResultStore(folder, sweep_results(cfg), derive=cell_figures, summarise=summarise_sweep)
    store.reserve.require()
    for warning in cfg.warnings:
        log(f"warning: {warning}")
    outcome = SweepOutcome(output_folder=folder, results=store.path)
    todo = plan(cfg, store)
    outcome.resumed, outcome.skipped = todo.resumed, todo.skipped
    settings = cell_settings(cfg)
    skipped_records = list(todo.skipped_records)

    def store_skipped() -> None:
        # Only once a model loaded and the cells were found measurable: bad input leaves no file behind.
        if skipped_records:
            store.add_many(list(skipped_records))
            skipped_records.clear()

    n_cells = sum(len(c) + len(todo.corner[s]) for s, c in todo.cells.items())
    if outcome.resumed:
        log(f"resuming: {outcome.resumed} of {n_cells} cells already in {store.path}")
    bar = tqdm(total=n_cells * max(1, cfg.repeats.min_runs if cfg.repeats.adaptive else cfg.repeats.runs),
               disable=not cfg.progress_bar, dynamic_ncols=True,
               bar_format="{desc} {n_fmt}/{total_fmt} runs|{bar}| [{elapsed}<{remaining}]{postfix}")
    measured_cells: set = set()
    budgets: Dict[Setting, float] = {}
    corner_pending = {s: list(c) for s, c in todo.corner.items() if c}
    if cfg.predict.skip_predicted_over is None:  # the corner is measured like any cell
        for setting, corner in corner_pending.items():
            todo.cells[setting] += corner
        corner_pending = {}

    def on_record(m: Measurement) -> None:
        store.add(m)
        outcome.runs += 1
        if m.cell.run == 0:
            measured_cells.add(m.cell.key())
            outcome.failed += m.status in FAILED
        bar.set_postfix_str(f"last: {m.label} {m.status}", refresh=False)
        bar.update(1)

    try:
        if cfg.noise_floor and any(todo.cells.values()):
            measure_noise_floor(cfg, store)
            floor = noise_floor(store.results.calibration[-NOISE_FLOOR_RUNS:])
            if floor is not None and floor.high:
                log(f"warning: this machine is noisy now: {floor.describe()}")
        for pass_index in itertools.count():
            did = False
            for setting in cfg.settings:
                wanted = [c for c in (runs_wanted(cfg, store, cell, measured_cells) for cell in todo.cells[setting])
                          if c is not None]
                if not wanted:
                    continue
                random.Random(cfg.seed + pass_index).shuffle(wanted)  # a new order each pass
                if bar.n + len(wanted) > bar.total:
                    bar.total = bar.n + len(wanted)
                run = SettingRun(cfg, setting, wanted, settings)
                run.measure(on_record, store_skipped, lambda event: budgets.setdefault(
                    setting, float(event.get("device_memory_bytes", 0))))
                did = True
                # Profiled figures come from a process of their own, after the timed ones.
                if setting.device.startswith("cuda") or cfg.profiling_dimensions.export_logs:
                    profiled = [c for c in wanted if c.run == 0 and store.get(c).ok]
                    if profiled:
                        SettingRun(cfg, setting, profiled, settings).profile(store.add_extra)
            if pass_index == 0 and corner_pending:
                # Memory predicted from the measured cells decides which corner cells run at all.
                for setting, corner in corner_pending.items():
                    limit = cfg.predict.skip_predicted_over
                    budget = budgets.get(setting, 0.0) if limit == "device" else float(limit) * 1e9
                    keep, skipped = over_budget(store, setting, corner, budget, settings, cfg)
                    store.add_many(skipped)
                    outcome.skipped_predicted += len(skipped)
                    todo.cells[setting] += keep
                corner_pending = {}
                continue
            if on_progress is not None and did:
                on_progress(store.snapshot())
            if not did:
                break
        store_skipped()
    finally:
        bar.close()
        store.reserve.release()
        # Also after an interruption: the tables show what was measured so far.
        if on_progress is not None and store.records():
            on_progress(store.snapshot())
    outcome.measured = len(measured_cells)
    return outcome
