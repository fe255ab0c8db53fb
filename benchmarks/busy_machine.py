"""Wall time against CPU cost on a busy machine: the same sweep quiet, beside one busy process, and beside three.

Runs ``python recipes/profile.py CONFIG`` three ways, one after the other in one invocation, each into its own
temporary folder: quiet; with one busy process (``python -c "while True: pass"``) running beside the whole sweep;
with three. For each it prints, over the CPU 1-thread cells, the median of the cells' wall-time RTF and of their
CPU cost (CPU time of the worker's threads / audio seconds), the median relative half-width of each interval over
runs, the sweep's own wall time against the config's ``time_budget_s`` and the 1-thread cells that did not reach their
precision target; then each busy run's ratios to the quiet one. Expected: the wall-time RTF and its interval grow
with the load, the CPU cost and its interval much less, and every run ends within its budget.

The grid: by default a REDUCED grid, because the default one (``profile.yaml``: 5 lengths x 3 batch sizes,
every thread count, adaptive repeats up to 8 runs) takes well over 10 minutes three times on a 2-core machine:
the default model (``encoder_asr``), lengths 1 and 2 s, batch size 1, the CPU with 1 thread, 4 fixed runs a cell,
no noise floor and no predictions (overrides written into a copy of the config). ``--full`` runs the config as
it is.

Run: ``python benchmarks/busy_machine.py [--config profile.yaml] [--full] [--busy 0 1 3]``
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from sbprof.analysis.sweep import analyse
from sbprof.results import load_results

ROOT = Path(__file__).resolve().parents[1]
REDUCED = {"devices": ["cpu"], "cpu_threads": [1], "repeats": {"runs": 4}, "noise_floor": False,
           "predict": {"fill": False, "validate": False}}
REDUCED_GRID = {"audio_mockup_secs": [1, 2], "batch_sizes": [1]}


def write_config(config: Path, folder: Path, full: bool) -> Path:
    """A copy of ``config`` writing into ``folder`` (reduced unless ``full``)."""
    tree = yaml.safe_load(config.read_text())
    if not full:
        tree.update(REDUCED)
        tree["profiling_dimensions"].update(REDUCED_GRID)
    tree["output_folder"] = str(folder / "out")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def run(config: Path, busy: int, full: bool) -> Dict[str, Optional[float]]:
    """One sweep beside ``busy`` spinning processes: its 1-thread figures and its wall time."""
    with tempfile.TemporaryDirectory(prefix=f"sbprof-busy{busy}-") as tmp:
        path = write_config(config, Path(tmp), full)
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        start = time.monotonic()
        try:
            subprocess.run([sys.executable, str(ROOT / "recipes" / "profile.py"), str(path), "--noprogressbar"],
                           check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        finally:
            took = time.monotonic() - start
            for p in spinners:
                p.kill()
                p.wait()
        summary = analyse(load_results(Path(tmp) / "out"))
    cells = [c for model in summary.models for s in model.settings if s.device == "cpu" and s.threads == 1
             for c in s.cells.values() if c.over_runs is not None and c.cpu_over_runs is not None]

    def median(values: List[float]) -> Optional[float]:
        return statistics.median(values) if values else None

    return {"wall_rtf": median([c.over_runs.interval.median for c in cells]),
            "wall_half": median([c.over_runs.interval.half_width_rel for c in cells]),
            "cpu_cost": median([c.cpu_over_runs.interval.median for c in cells]),
            "cpu_half": median([c.cpu_over_runs.interval.half_width_rel for c in cells]),
            "run_s": took, "cells": len(cells),
            "missed": sum(len(s.missed) for model in summary.models for s in model.settings
                          if s.device == "cpu" and s.threads == 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "profile.yaml"))
    parser.add_argument("--full", action="store_true", help="run the config's grid as it is (long)")
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 3], help="busy processes per run")
    args = parser.parse_args()
    rows = {busy: run(Path(args.config), busy, args.full) for busy in args.busy}
    quiet = rows[args.busy[0]]
    budget = yaml.safe_load(Path(args.config).read_text()).get("time_budget_s")
    print(f"grid: {'as configured' if args.full else 'reduced (1, 2 s x 1; cpu 1 thread; 4 runs)'}; "
          f"medians over the 1-thread cells; time_budget_s: {budget}")
    print(f"{'busy':>4} {'cells':>5} {'missed':>6} {'wall RTF':>9} {'+-wall':>7} {'CPU cost':>9} {'+-CPU':>7} "
          f"{'run s':>7} {'in budget':>9}   ratios to quiet: wall RTF, +-wall, CPU cost, +-CPU, run s")
    for busy, r in rows.items():
        ratios = ", ".join("n/a" if not r[k] or not quiet[k] else f"{r[k] / quiet[k]:.2f}"
                           for k in ("wall_rtf", "wall_half", "cpu_cost", "cpu_half", "run_s"))
        within = "n/a" if budget is None else ("yes" if r["run_s"] <= budget else "NO")
        print(f"{busy:>4} {r['cells']:>5} {r['missed']:>6} {r['wall_rtf'] or 0:>9.4f} "
              f"{100 * (r['wall_half'] or 0):>6.1f}% {r['cpu_cost'] or 0:>9.4f} {100 * (r['cpu_half'] or 0):>6.1f}% "
              f"{r['run_s']:>7.1f} {within:>9}   {ratios}")


if __name__ == "__main__":
    main()
