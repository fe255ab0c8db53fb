"""A model's RTF or peak memory held to a stored baseline: what the ``sbprof_budget`` pytest fixture runs.

:func:`check_budget` measures one variant at one point in ``runs`` fresh
worker processes (the comparison runner), then:

- with no stored baseline (or ``update=True``), stores those runs as the
  baseline (``<baseline_dir>/<name>/results.json``): status ``recorded``;
- otherwise measures a new set of runs in a scratch folder and hands both
  to the regression gate (:func:`sbprof.analysis.gate.gate`): status
  ``failed`` when the cell regressed beyond ``threshold`` (the gate's
  run-level verdict), else ``passed``. Like the gate, it decides on CPU
  time when other processes' load beside the runs explains their wall-time
  spread, and its message says so (``judged on CPU time: load ...``).

Runs must be at least 4 (at 95%): fewer cannot show between-process noise.
Cells are matched on the budget's name, so a baseline committed to a
repository is found again from another clone or folder.

Nothing is touched before every option is checked (:func:`check_options`).
Then the baselines folder's lock is taken (a second process waits, and then
finds the baseline the first one recorded), except for a plain check in a
folder that cannot be written (a read-only checkout in CI): nothing can
change its baseline, so it needs no lock. A new baseline is measured into
``<baseline_dir>/.<name>.new`` and swapped in only once every run
succeeded, so a failure or Ctrl-C leaves the stored baseline as it was.
"""
from __future__ import annotations

import inspect
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from sbprof.analysis.gate import GATE_METRICS, GateReport, describe_row, gate, min_runs
from sbprof.analysis.verdict import run_statistic
from sbprof.base.checks import check_file_name, is_int, is_positive_number, nearest
from sbprof.compare_models.config import validate
from sbprof.compare_models.schema import CompareConfig
from sbprof.base.errors import ConfigError, MeasurementError
from sbprof.jobs.runner import run_config
from sbprof.results import RESULTS_FILE, FolderLock, Results, load_results


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


def _config(tree: Mapping[str, Any], name: str, folder: Path) -> CompareConfig:
    return validate({**tree, "output_folder": str(folder)}, f"budget {name!r}", Path.cwd(), {"noprogressbar": True})


def _measure(tree: Mapping[str, Any], name: str, folder: Path) -> Results:
    from sbprof.compare_models import JOB

    outcome = run_config(JOB, _config(tree, name, folder), log=lambda line: None)
    return _named(load_results(outcome.results), name)


def check_options(name: Any, baseline_dir: Path, audio_s: Any, metric: Any, threshold: Any, confidence: Any,
                  runs: Any, statistic: Any) -> Path:
    """Refuse any bad option in one line before anything is measured, made or deleted; the baseline's folder.

    The name must be a file name (not ``.``, ``..``, nor hidden: the folder's
    lock and scratch folders are hidden) that stays inside ``baseline_dir``
    once resolved (a symbolic link out of it is refused).
    """
    check_file_name(name, "budget name")
    if name.startswith("."):
        raise ConfigError(f"budget name {name!r} must not start with '.' (hidden names hold the baselines folder's "
                          "lock and scratch folders)")
    if not is_positive_number(audio_s):
        raise ConfigError(f"budget {name!r}: audio_s must be a positive number of seconds, got {audio_s!r}")
    if metric not in GATE_METRICS:
        raise ConfigError(f"budget {name!r}: metric must be one of {', '.join(GATE_METRICS)}, got {metric!r}"
                          f"{nearest(str(metric), list(GATE_METRICS))}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise ConfigError(f"budget {name!r}: threshold must be a fraction in [0, 1] (0.10 allows 10% more), "
                          f"got {threshold!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, float) or not 0.5 <= confidence < 1:
        raise ConfigError(f"budget {name!r}: confidence must be a level in [0.5, 1), e.g. 0.95, got {confidence!r}")
    if not is_int(runs) or runs < min_runs(confidence):
        raise ConfigError(f"budget {name!r}: runs={runs!r}; a verdict at {100 * confidence:g}% needs at least "
                          f"{min_runs(confidence)} fresh-process runs")
    if not isinstance(statistic, str):
        raise ConfigError(f"budget {name!r}: statistic must be median, min or pNN, got {statistic!r}")
    run_statistic(statistic)
    folder = Path(os.path.expanduser(str(baseline_dir)))
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"baselines folder {str(folder)!r} exists and is not a folder")
    try:
        root, stored = folder.resolve(), (folder / name).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: a symbolic link loop
        raise ConfigError(f"budget {name!r}: {str(folder / name)!r} cannot be resolved ({exc})") from None
    if stored.parent != root:
        raise ConfigError(f"budget {name!r}: {str(folder / name)!r} resolves to {str(stored)!r}, outside the "
                          f"baselines folder {str(root)!r}")
    return root


def _swap_in(new: Path, stored: Path) -> None:
    """Replace the folder ``stored`` by ``new``; Ctrl-C and SIGTERM wait until both renames are done."""
    old = stored.parent / f".{stored.name}.old"
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        if stored.exists():
            os.rename(stored, old)
        os.rename(new, stored)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    shutil.rmtree(old, ignore_errors=True)


def _record(tree: Mapping[str, Any], name: str, stored: Path, runs: int) -> BudgetResult:
    """Measure a new baseline beside the stored one and swap it in only when every run succeeded."""
    new = stored.parent / f".{name}.new"
    shutil.rmtree(new, ignore_errors=True)  # left by a run killed with -9 (we hold the lock)
    try:
        results = _measure(tree, name, new)
        failed = [m for m in results.records if not m.ok]
        if failed or not results.records:
            why = f"{failed[0].status}: {failed[0].message}" if failed else "no run was recorded"
            kept = "the stored baseline is unchanged" if stored.exists() else "nothing was recorded"
            raise MeasurementError(f"budget {name!r}: {len(failed)} of {len(results.records)} runs failed ({why}); "
                                   f"{kept}")
        _swap_in(new, stored)
    finally:
        shutil.rmtree(new, ignore_errors=True)
    return BudgetResult(name, "recorded", f"budget {name!r}: baseline of {runs} runs recorded in {stored}; "
                                          "later runs are checked against it", stored)


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
    root = check_options(name, Path(baseline_dir), audio_s, metric, threshold, confidence, runs, statistic)
    tree = {"variants": [{"name": name, **variant}], "vary": "audio_s", "values": [audio_s],
            "batch_size": batch_size, "measured": samples, "warmup": warmup, "repeats": {"runs": runs},
            "devices": device, "cpu_threads": threads, "example_audio": example_audio, "seed": seed,
            "energy": {"cpu": False, "gpu": False}}
    stored = root / name
    _config(tree, name, root / f".{name}.new")  # the model, sizes and the rest, refused before anything is made
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"baselines folder {str(root)!r} cannot be made: {exc.strerror or exc}") from None
    if not update and (stored / RESULTS_FILE).is_file() and not _writable(root):
        # A read-only checkout (in CI): nothing can change the baseline meanwhile, so a check needs no lock.
        return _check(tree, name, stored, metric, threshold, confidence, statistic)
    try:
        lock = FolderLock(root, wait=True)
        lock.acquire()
    except OSError as exc:
        what = "record a new baseline" if update or stored.exists() else "record the first baseline"
        raise ConfigError(f"baselines folder {str(root)!r} cannot be written ({exc.strerror or exc}): cannot {what} "
                          f"of budget {name!r} there; give a writable folder (--sbprof-baselines DIR), or check "
                          "against a baseline already stored (without --sbprof-update-baselines)") from None
    try:
        old = root / f".{name}.old"
        if old.exists() and not stored.exists():  # a run killed between the two renames of a swap
            os.rename(old, stored)
        if update or not (stored / RESULTS_FILE).is_file():
            return _record(tree, name, stored, runs)
        return _check(tree, name, stored, metric, threshold, confidence, statistic)
    finally:
        lock.release()


def _writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (a read-only mount or a folder not ours cannot)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".sbprof-probe.", dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _check(tree: Mapping[str, Any], name: str, stored: Path, metric: str, threshold: float, confidence: float,
           statistic: str) -> BudgetResult:
    """Measure the budget again in a scratch folder and hand it with the stored baseline to the gate."""
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


OPTIONS = tuple(p for p in inspect.signature(check_budget).parameters if p not in ("name", "variant", "baseline_dir",
                                                                                     "update"))
"""What ``sbprof_budget.check`` passes on as options (anything else is refused by name)."""
