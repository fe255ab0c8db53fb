"""The straggler rule on a busy machine: false verdicts on balanced ranks, and the cost of a known straggler, by load.

Launches ``torchrun --standalone --nproc_per_node=2`` (gloo, one thread per rank) on a plain DDP training loop
decorated with ``@sbprof.profile_optimiser`` (wait 1, warm-up 1, 8 recorded steps of about 20 ms), beside a chosen
number of busy processes (``python -c "while True: pass"``), and reads the straggler verdict of the report that
rank 0 merges at the end:

- balanced: both ranks do the same work; any straggler verdict is a false one;
- ``--spin S``: rank 1 also burns S seconds of CPU time (``process_time``) in each step; the verdict should name
  rank 1 with a cost near S, whatever the load.

Each checkout given with ``--sbprof`` (the repository root whose ``sbprof`` runs; default this one) is run the same
way, interleaved launch by launch, so that a comparison of two checkouts sees the same machine. Prints, per
checkout, busy processes and workload: launches, straggler verdicts (and the false-verdict rate of the balanced
ones), the median and range of the verdicts' first figure (the cost), and the 1-minute load average seen.

Run: ``python benchmarks/straggler_load.py --sbprof /path/to/main --sbprof . --busy 1 2 --launches 10 --spin 0.04``
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
LOOP = '''
import os, time, torch, torch.distributed as dist
import sbprof
dist.init_process_group("gloo")
torch.manual_seed(0)
rank, spin = dist.get_rank(), float(os.environ.get("SPIN_S", "0"))
net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                          torch.nn.Linear(1024, 8))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 256), torch.randn(128, 8)

@sbprof.profile_optimiser(wait=1, warmup=1, active=8)
def step():
    if rank == 1 and spin:
        start = time.process_time()
        while time.process_time() - start < spin:
            pass
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()

for _ in range(10):
    step()
'''
FIGURES = re.compile(r"^   - figures: [^0-9]*([0-9.]+) (ms|s)", re.M)


def launch(checkout: Path, folder: Path, spin: float) -> Tuple[Optional[float], bool, float]:
    """One launch: (the straggler verdict's first figure in seconds or None, whether it named rank 1, load)."""
    script = folder / "loop.py"
    script.write_text(LOOP)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(checkout), SPIN_S=str(spin),
               SBPROF_RANK_FOLDER=str(folder / "ranks"), SBPROF_MERGE_TIMEOUT_S="60")
    for key in ("RANK", "WORLD_SIZE"):
        env.pop(key, None)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                    "--max_restarts=0", str(script)], cwd=folder, env=env, capture_output=True, timeout=600)
    load = os.getloadavg()[0]
    reports = list((folder / "ranks").glob("*/report.md"))
    if not reports:
        raise RuntimeError(f"{checkout}: no report in {folder}")
    text = reports[0].read_text().split("## What limits this", 1)[1]
    verdict = next((block for block in text.split("\n\n") if "**straggler.**" in block), None)
    if verdict is None:
        return None, False, load
    value, unit = FIGURES.search(verdict).groups()
    return float(value) / (1e3 if unit == "ms" else 1.0), "Rank 1 " in verdict, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sbprof", action="append", type=Path, help="a checkout to run (repeat; default this one)")
    parser.add_argument("--busy", type=int, nargs="+", default=[1, 2], help="busy processes beside the ranks")
    parser.add_argument("--launches", type=int, default=10, help="launches per checkout, load and workload")
    parser.add_argument("--spin", type=float, default=0.0, help="also launch with rank 1 burning this CPU per step")
    args = parser.parse_args()
    checkouts = [c.resolve() for c in (args.sbprof or [ROOT])]
    workloads = [0.0] + ([args.spin] if args.spin else [])
    results: Dict[Tuple[str, int, float], List[Tuple[Optional[float], bool, float]]] = {}
    for busy in args.busy:
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        time.sleep(2)
        try:
            for _ in range(args.launches):
                for spin in workloads:
                    for checkout in checkouts:
                        with tempfile.TemporaryDirectory(prefix="sbprof-straggler-") as tmp:
                            results.setdefault((str(checkout), busy, spin), []).append(
                                launch(checkout, Path(tmp), spin))
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    print(f"{os.cpu_count()} logical cores; 2 ranks x 1 thread; {args.launches} launches per row\n")
    print("| checkout | busy processes | rank 1 spins (CPU s/step) | straggler verdicts | false-verdict rate | "
          "cost, median [min, max] | load (1 min), median |")
    print("|---|---|---|---|---|---|---|")
    for (checkout, busy, spin), rows in results.items():
        costs = [c for c, named, _ in rows if c is not None and (named or not spin)]
        fired = sum(c is not None for c, _, _ in rows)
        rate = f"{fired / len(rows) * 100:.0f} %" if not spin else "n/a"
        cost = (f"{statistics.median(costs) * 1e3:.1f} ms [{min(costs) * 1e3:.1f}, {max(costs) * 1e3:.1f}]"
                if costs else "n/a")
        named = "" if not spin else f" ({sum(n for _, n, _ in rows)} name rank 1)"
        print(f"| {checkout} | {busy} | {spin or 'balanced'} | {fired} of {len(rows)}{named} | {rate} | {cost} | "
              f"{statistics.median(load for _, _, load in rows):.1f} |")


if __name__ == "__main__":
    main()
