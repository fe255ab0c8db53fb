"""How often ``sbprof run --vary`` reads a change that is not there, and how often it sees a known 10 % one.

Each trial is a whole comparison, as a user runs it (``--rounds`` fresh ``sbprof run`` processes per variant,
interleaved), on this project's test loop (``tests/run/recipes/vary/loop.py``: a step that naps
``--call_ms``, no data wait):

- the no-op: ``--vary "cudnn_benchmark: [false, true]"`` on the CPU, a knob the script never reaches; a trial is a
  false change when the throughput ratio's interval excludes 1 (the report would not say "no change the runs can
  show"); target: at most 5 %;
- the known change: ``--vary "call_ms: [50, 55]"`` (the recipe's own option: each step 10 % longer, a sleep that
  load cannot shorten); a trial detects it when the ratio's interval lies below 1.

Prints both rates with their exact 95 % binomial intervals, and the median ratio of the 10 % trials (truth:
1 / 1.1 = 0.909). Slow: each trial is ``2 x rounds`` fresh processes (about 5 s each on a quiet 2-core machine).

    python benchmarks/vary_noise.py --trials 20 --rounds 4
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[1]
LOOP = ROOT / "tests" / "run" / "recipes" / "vary" / "loop.py"


def trial(spec: str, rounds: int, folder: Path) -> Tuple[float, float, float]:
    """One comparison: the throughput ratio of the second variant to the base, with its interval."""
    from sbprof.analysis.vary import analyse
    from sbprof.results import load_results

    cmd = [sys.executable, "-m", "sbprof", "run", "--vary", spec, "--rounds", str(rounds), "--warmup", "1",
           "--measured", "5", "--output_folder", str(folder), str(LOOP), "--steps", "12", "--call_ms", "50"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    report = analyse(load_results(folder))
    other = report.variants[1]
    ratio = other.figures[report.throughput].ratio
    return ratio.ratio, ratio.low, ratio.high


def binomial(k: int, n: int) -> Tuple[float, float]:
    """Exact (Clopper-Pearson) 95 % interval of a rate ``k / n``."""
    from scipy.stats import beta

    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def main(argv: List[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        noop = [trial("cudnn_benchmark: [false, true]", args.rounds, Path(tmp) / f"noop{i}")
                for i in range(args.trials)]
        known = [trial("call_ms: [50, 55]", args.rounds, Path(tmp) / f"known{i}") for i in range(args.trials)]
    false = sum(1 for _, low, high in noop if not low <= 1 <= high)
    seen = sum(1 for _, _, high in known if high < 1)
    n = args.trials
    lo, hi = binomial(false, n)
    print(f"no-op variant: {false}/{n} trials read a change ({100 * false / n:.0f} % "
          f"[{100 * lo:.0f}, {100 * hi:.0f}]; target <= 5 %)")
    lo, hi = binomial(seen, n)
    print(f"known 10 % slower step: {seen}/{n} trials detected it ({100 * seen / n:.0f} % [{100 * lo:.0f}, "
          f"{100 * hi:.0f}]); median ratio {statistics.median(r for r, _, _ in known):.3f} (truth 0.909)")


if __name__ == "__main__":
    main(sys.argv[1:])
