"""Runs a comparison: each variant in fresh worker processes, every point saved as it comes.

Runs are interleaved: run 0 of every variant, then run 1 of every variant,
and so on, so slow drift of the machine (thermal state, other load) spreads
over the variants instead of landing on one. Each (variant, run) is one
fresh ``sbprof.compare.job`` worker measuring all the variant's points of
that run; each record goes to ``results.json`` at once (atomically). Running
the same command again measures only the missing points; a file measured
under other rules (samples, warm-up, varied dimension, device, threads,
input), on another machine or with another build of a variant is refused.
The caller holds the output folder's lock and renders (the runner never renders).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tqdm import tqdm

from sbprof.compare.meterlog import attach_meter_log
from sbprof.compare.schema import CompareConfig, VariantSpec
from sbprof.env import collect_env
from sbprof.figures import cell_figures
from sbprof.record import Cell, Measurement
from sbprof.results.store import MACHINE_KEYS, Results, ResultStore
from sbprof.audio import input_kind
from sbprof.workers.supervisor import Supervisor, WorkerJob

LOG_DIR = "logs"
FAILED = ("oom", "error")


@dataclass
class CompareOutcome:
    """What a run did and where its results are."""

    output_folder: Path
    results: Path
    measured: int = 0
    resumed: int = 0
    failed: int = 0


def _file_digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def variant_fingerprint(spec: VariantSpec) -> str:
    """Identifies the build of a variant: a local model's content hash, a folder's files, a module's YAML."""
    if spec.kind == "local_model":
        from sbprof.models.build import content_hash

        return f"local:{content_hash(spec.source)}"
    if spec.kind == "folder":
        folder = Path(spec.source)
        listing = "".join(f"{p.relative_to(folder)}:{p.stat().st_size}\n"
                          for p in sorted(folder.rglob("*")) if p.is_file())
        return f"folder:{hashlib.sha256(listing.encode()).hexdigest()[:8]}{_file_digest(folder / 'hyperparams.yaml')}"
    if spec.kind == "module":
        return f"yaml:{_file_digest(Path(spec.yaml))}"
    return f"hub:{spec.source}"


def point_input(cfg: CompareConfig, spec: VariantSpec) -> str:
    """What a variant is fed (``Cell.input``): the recording or seeded noise, or seeded random features."""
    if spec.input == "features":
        return f"random-features:seed={cfg.seed}"
    return input_kind(cfg.example_audio, cfg.seed)


def comparison_results(cfg: CompareConfig) -> Results:
    """What this comparison measures under: its rules, its variants (with fingerprints) and this machine."""
    fixed = {"audio_s": cfg.audio_s} if cfg.vary == "batch_size" else {"batch_size": cfg.batch_size}
    env = collect_env()
    models = {}
    for v in cfg.variants:
        info = {k: val for k, val in v.to_dict().items() if val not in (None, {}) and k != "name"}
        models[v.name] = {**info, "fingerprint": variant_fingerprint(v)}
    return Results(
        job="compare",
        rules={"vary": cfg.vary, **fixed, "frame_shift_s": cfg.frame_shift_s, "input": input_kind(cfg.example_audio,
               cfg.seed), "warmup": cfg.warmup, "samples": cfg.samples, "device": cfg.device, "threads": cfg.threads},
        models=models,
        machine={k: getattr(env, k) for k in MACHINE_KEYS},
    )


def point_cell(cfg: CompareConfig, spec: VariantSpec, value: float, run: int) -> Cell:
    """The coordinates of one point: the varied value in its field, the fixed ones beside it."""
    audio_s, batch_size, params = cfg.audio_s, cfg.batch_size, {}
    if cfg.vary == "audio_s":
        audio_s = value
    elif cfg.vary == "frames":
        params = {"frames": int(value)}
        audio_s = value * cfg.frame_shift_s
    else:
        batch_size = int(value)
    return Cell(model=spec.model, variant=spec.name, device=cfg.device, threads=cfg.threads, audio_s=audio_s,
                batch_size=batch_size, input=point_input(cfg, spec), run=run, params=params)


def point_label(cfg: CompareConfig, cell: Cell) -> str:
    value = {"audio_s": f"{cell.audio_s:g} s", "frames": f"{cell.params.get('frames')} frames",
             "batch_size": f"batch {cell.batch_size}"}[cfg.vary]
    return f"{cell.variant} {value} run {cell.run}"


def point_settings(cfg: CompareConfig, spec: VariantSpec) -> Dict[str, Any]:
    """How each point is measured, beside its coordinates (the worker adds the sample rate)."""
    return {"kind": spec.kind, "interface": spec.type or f"module ({spec.input})", "method": spec.method,
            "overrides": dict(spec.overrides), "vary": cfg.vary, "warmup": cfg.warmup, "samples": cfg.samples,
            "example_audio": Path(cfg.example_audio).name if cfg.example_audio else None}


def plan(cfg: CompareConfig, store: ResultStore) -> Tuple[List[Tuple[int, VariantSpec, List[Cell]]], int]:
    """The (run, variant, missing cells) worker jobs in interleaved order, and how many cells are kept."""
    todo, kept = [], 0
    for run in range(cfg.runs):
        for spec in cfg.variants:
            missing = []
            for value in cfg.values:
                cell = point_cell(cfg, spec, value, run)
                if store.get(cell) is None:
                    missing.append(cell)
                else:
                    kept += 1
            if missing:
                todo.append((run, spec, missing))
    return todo, kept


def _worker_job(cfg: CompareConfig, spec: VariantSpec, run: int, cells: List[Cell]) -> WorkerJob:
    settings = point_settings(cfg, spec)
    items = [{"cell": c.to_dict(), "label": point_label(cfg, c), "settings": settings} for c in cells]
    threads = str(cfg.threads)
    return WorkerJob(
        module="sbprof.compare.job", payload={"config": cfg.to_dict(), "variant": spec.name, "items": items},
        n_items=len(cells), name=f"worker for {spec.name} (run {run})",
        log_path=Path(cfg.output_folder) / LOG_DIR / f"worker-{spec.name}.log",
        # Native libraries size their own pools from these at load time.
        env={"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})


def run_comparison(cfg: CompareConfig, log: Callable[[str], None] = print,
                   on_progress: Optional[Callable[[Results], None]] = None) -> CompareOutcome:
    """Measure every missing point of the comparison.

    The caller has checked the output folder and holds its lock.

    Arguments
    ---------
    cfg : CompareConfig
        A validated configuration (:func:`sbprof.compare.config.load_compare_config`).
    log : callable
        Receives one line per notable event.
    on_progress : callable, optional
        Called with the results after each worker, and at the end (also when
        the run stops early), e.g. to render reports.

    Returns
    -------
    CompareOutcome
    """
    folder = Path(cfg.output_folder)
    store = ResultStore(folder, comparison_results(cfg), derive=cell_figures)
    store.reserve.require()
    outcome = CompareOutcome(output_folder=folder, results=store.path)
    todo, outcome.resumed = plan(cfg, store)
    total = outcome.resumed + sum(len(cells) for _, _, cells in todo)
    if outcome.resumed:
        log(f"resuming: {outcome.resumed} of {total} points already in {store.path}")
    bar = tqdm(total=total, initial=outcome.resumed, disable=not cfg.progress_bar, dynamic_ncols=True,
               desc="sbprof: points")

    def on_record(m: Measurement) -> None:
        store.add(m)
        outcome.measured += 1
        outcome.failed += m.status in FAILED
        bar.set_postfix_str(f"last: {m.label} {m.status}", refresh=False)
        bar.update(1)

    try:
        for run, spec, cells in todo:
            def crashed(index: int, message: str, cells: List[Cell] = cells, spec: VariantSpec = spec) -> None:
                cell = cells[index]
                on_record(Measurement(label=point_label(cfg, cell), cell=cell, status="error", message=message,
                                      warmup=cfg.warmup, settings=point_settings(cfg, spec), env=collect_env()))

            Supervisor(_worker_job(cfg, spec, run, cells), lambda i, payload: on_record(Measurement.from_dict(payload)),
                       crashed).run()
            if on_progress is not None:
                on_progress(store.snapshot())
        if cfg.energy.meter_log:
            updated, problems = attach_meter_log(store.records(), cfg.energy)
            store.add_many(updated)
            for problem in problems:
                log(f"warning: {problem}")
    finally:
        bar.close()
        store.reserve.release()
        if on_progress is not None and store.records():
            on_progress(store.snapshot())
    return outcome
