"""Does a cell's reported interval hold on the next run of the same sweep? Side by side with quartiles.

The same small sweep (default model, CPU, one thread) is run ``--sweeps``
times, each time into a fresh output folder, with ``--runs`` fresh worker
processes per cell. For each pair of consecutive sweeps and each cell it
checks whether the later sweep's figure falls inside the earlier sweep's:

- the next-run interval (what the report prints with several runs): the
  later median over runs inside the earlier interval;
- the confidence interval for the median over runs (kept in results.json),
  the same way: it covers the true median, not another estimate of it;
- within-run quartiles (what a one-run report prints): the later first run's
  median inside the earlier first run's [q1, q3] of batches.

A 95 % interval should hold in at least 90 % of cells; quartiles of one
run's batches, which ignore the spread between processes, hold far less
often on a shared machine.

Run: ``python benchmarks/interval_coverage.py [--sweeps 4] [--runs 6]``
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from sbprof.figures import batch_audio_seconds
from sbprof.results import load_results
from sbprof.runs import group_runs, rtf_over_runs
from sbprof.stats import summarise

REPO = Path(__file__).resolve().parents[1]
SWEEP = """pretrained_model: {{source: encoder_asr, type: EncoderASR}}
profiling_dimensions: {{audio_mockup_secs: [1, 2, 4], batch_sizes: [1, 4], example_audio: example,
                       triangle_only: False, export_logs: False}}
devices: [cpu]
cpu_threads: [1]
warmup: 2
measured: 5
repeats: {{runs: {runs}, confidence: 0.95}}
noise_floor: False
output_folder: {out}
"""

Key = Tuple[float, int]


def one_sweep(folder: Path, runs: int) -> Dict[Key, dict]:
    (folder / "s.yaml").write_text(SWEEP.format(runs=runs, out=folder / "out"))
    subprocess.run([sys.executable, str(REPO / "recipes" / "profile.py"), str(folder / "s.yaml"), "--noprogressbar"],
                   check=True, capture_output=True, text=True)
    cells = {}
    for group in group_runs(load_results(folder / "out").records).values():
        ok = [m for m in group if m.ok]
        summary = rtf_over_runs(ok)
        first = summarise([w / batch_audio_seconds(ok[0]) for w in ok[0].wall_s])
        cells[ok[0].cell.grid_key] = {"interval": summary.interval, "median_ci": summary.median_interval,
                                      "first": first, "runs": summary.run_medians}
    return cells


def cv(values: List[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def diagnose(sweeps: List[Dict[Key, dict]]) -> None:
    """Why an interval misses: is the spread between sweeps more than the runs inside one sweep predict?

    If runs were independent draws from one distribution, the median over n
    runs would vary between sweeps by about 1.25 x (run-to-run CV) / sqrt(n);
    a larger spread between sweeps is a shift that all runs of one sweep
    share (the machine's state over minutes), which no interval computed
    inside one sweep can see.
    """
    keys = list(sweeps[0])
    between = [cv([s[k]["interval"].median for s in sweeps]) for k in keys]
    predicted = [1.25 * statistics.median(cv(s[k]["runs"]) for s in sweeps) / len(sweeps[0][k]["runs"]) ** 0.5
                 for k in keys]
    # One factor per sweep, shared by its cells: the median over cells of (cell median / the cell's median
    # over all sweeps).
    factors = [statistics.median(s[k]["interval"].median / statistics.median(t[k]["interval"].median for t in sweeps)
                                 for k in keys) for s in sweeps]
    print(f"spread of a cell's median between sweeps (CV, median over cells): {100 * statistics.median(between):.1f}%; "
          f"expected from the runs inside a sweep: {100 * statistics.median(predicted):.1f}%")
    print("each sweep's shared factor (median over cells of cell median / median over sweeps): "
          + ", ".join(f"{f:.3f}" for f in factors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=4)
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    t0 = time.perf_counter()
    sweeps: List[Dict[Key, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.sweeps):
            folder = Path(tmp) / f"sweep{i}"
            folder.mkdir()
            sweeps.append(one_sweep(folder, args.runs))
    interval_hits = ci_hits = quartile_hits = total = 0
    widths, ci_widths, quartile_widths = [], [], []
    for before, after in zip(sweeps, sweeps[1:]):
        for key, cell in before.items():
            total += 1
            i, c, q = cell["interval"], cell["median_ci"], cell["first"]
            interval_hits += i.low <= after[key]["interval"].median <= i.high
            ci_hits += c.low <= after[key]["interval"].median <= c.high
            quartile_hits += q.q1 <= after[key]["first"].median <= q.q3
            widths.append(i.half_width_rel)
            ci_widths.append(c.half_width_rel)
            quartile_widths.append(q.iqr / 2 / q.median)
    level = statistics.median(c["interval"].confidence for s in sweeps for c in s.values())
    print(f"{args.sweeps} sweeps x {len(sweeps[0])} cells x {args.runs} runs in fresh processes, encoder_asr, 1 CPU thread, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'interval':<34} {'median half-width':>18} {'next sweep inside':>18}")
    ci_level = statistics.median(c["median_ci"].confidence for s in sweeps for c in s.values())
    print(f"{f'next run, reported ({100 * level:.1f} %, {args.runs} runs)':<34} "
          f"{100 * statistics.median(widths):>17.1f}% {interval_hits:>9}/{total} = {100 * interval_hits / total:.0f}%")
    print(f"{f'median CI ({100 * ci_level:.1f} %, {args.runs} runs)':<34} "
          f"{100 * statistics.median(ci_widths):>17.1f}% {ci_hits:>9}/{total} = {100 * ci_hits / total:.0f}%")
    print(f"{'within-run quartiles (one run)':<34} {100 * statistics.median(quartile_widths):>17.1f}% "
          f"{quartile_hits:>9}/{total} = {100 * quartile_hits / total:.0f}%")
    diagnose(sweeps)


if __name__ == "__main__":
    main()
