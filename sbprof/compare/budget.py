"""A model's RTF or peak memory held to a stored baseline: what the ``sbprof_budget`` pytest fixture runs.

:func:`check_budget` measures one variant at one point in ``runs`` fresh
worker processes (the comparison runner), then:

- with no stored baseline (or ``update=True``), stores those runs as the
  baseline (``<baseline_dir>/<name>/results.json``): status ``recorded``;
- otherwise measures a new set of runs in a scratch folder and hands both
  to the regression gate (:func:`sbprof.analysis.gate.gate`): status
  ``failed`` when the cell regressed beyond ``threshold`` (the gate's
  run-level verdict), else ``passed``.

Runs must be at least 4 (at 95%): fewer cannot show between-process noise.
Cells are matched on the budget's name, so a baseline committed to a
repository is found again from another clone or folder.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from sbprof.analysis.gate import GateReport, describe_row, gate, min_runs
from sbprof.compare.config import validate
from sbprof.errors import ConfigError
from sbprof.jobs.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.results import RESULTS_FILE, Results, load_results


@dataclass(frozen=True)
class BudgetResult:
    """What :func:`check_budget` found: ``status`` is recorded, passed or failed."""

    name: str
    status: str
    message: str
    baseline: Path
    report: Optional[GateReport] = None


def _named(results: Results, name: str) -> Results:
    """The records with ``Cell.model`` set to the budget's name (a model folder's path differs between clones)."""
    records = [replace(m, cell=replace(m.cell, model=name)) for m in results.records]
    return Results(job=results.job, rules=results.rules, models=results.models, machine=results.machine,
                   records=records, notes=results.notes)


def _measure(tree: Mapping[str, Any], name: str, folder: Path) -> Results:
    cfg = validate({**tree, "output_folder": str(folder)}, f"budget {name!r}", Path.cwd(), {"noprogressbar": True})
    outcome = run_config(get_job("compare-models"), cfg, log=lambda line: None)
    return _named(load_results(outcome.results), name)


def check_budget(name: str, variant: Mapping[str, Any], baseline_dir: Union[str, Path], *, audio_s: float = 2.0,
                 batch_size: int = 1, metric: str = "rtf", threshold: float = 0.10, confidence: float = 0.95,
                 runs: int = 4, samples: int = 10, warmup: int = 1, threads: int = 1, device: str = "cpu",
                 example_audio: Optional[str] = None, seed: int = 1234, update: bool = False,
                 statistic: str = "median") -> BudgetResult:
    """Check (or record) the budget ``name`` of one variant at one point.

    Arguments
    ---------
    name : str
        Names the baseline (a folder under ``baseline_dir``).
    variant : mapping
        A comparison variant without its name: ``source``/``type`` (and
        optional ``method``, ``args``, ``overrides``) for a pretrained
        interface, or ``yaml``/``module`` for a module.
    baseline_dir : str or Path
        Where baselines are stored.
    audio_s, batch_size : the point measured.
    metric : str
        ``rtf`` or ``peak_memory``.
    threshold : float
        Allowed relative increase (0.10: 10%).
    confidence : float
        Level of the gate's interval.
    runs, samples, warmup, threads, device, example_audio, seed
        How the point is measured (runs: fresh processes, at least 4 at 95%).
    update : bool
        Record a new baseline even when one exists.
    statistic : str
        What each run is reduced to for the verdict: ``median``, ``min`` or
        ``pNN`` (e.g. ``p10``, steadier on a shared machine with ~100 samples a run).

    Returns
    -------
    BudgetResult
    """
    if runs < min_runs(confidence):
        raise ConfigError(f"budget {name!r}: runs={runs}; a verdict at {100 * confidence:g}% needs at least "
                          f"{min_runs(confidence)} fresh-process runs")
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"budget name must be a non-empty string without '/', got {name!r}")
    tree = {"variants": [{"name": name, **variant}], "vary": "audio_s", "values": [audio_s],
            "batch_size": batch_size, "measured": samples, "warmup": warmup, "repeats": {"runs": runs},
            "devices": device, "cpu_threads": threads, "example_audio": example_audio, "seed": seed,
            "energy": {"cpu": False, "gpu": False}}
    stored = Path(baseline_dir) / name
    if update or not (stored / RESULTS_FILE).is_file():
        if stored.exists():
            shutil.rmtree(stored)
        _measure(tree, name, stored)
        return BudgetResult(name, "recorded", f"budget {name!r}: baseline of {runs} runs recorded in {stored}; "
                                              "later runs are checked against it", stored)
    baseline = _named(load_results(stored), name)
    scratch = Path(tempfile.mkdtemp(prefix=f"sbprof-budget-{name}-"))
    try:
        new = _measure(tree, name, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = gate(baseline, new, metric=metric, threshold=threshold, confidence=confidence, statistic=statistic)
    lines = "; ".join(describe_row(r) for r in report.rows)
    failed = bool(report.regressed or report.unjudged or report.only_baseline)
    missing = f"; not measured now: {', '.join(report.only_baseline)}" if report.only_baseline else ""
    status = "failed" if failed else "passed"
    return BudgetResult(name, status, f"budget {name!r} ({metric}, threshold {100 * threshold:g}%): {lines}{missing}",
                        stored, report)
