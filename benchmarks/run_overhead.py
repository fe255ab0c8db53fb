"""What ``sbprof run`` costs a training loop, against the same script run without it, in fresh processes.

A plain PyTorch loop runs in three arms per round, each a fresh process, the
order rotating every round (so drift of the machine hits every arm alike):

- ``plain``: the script alone; its own clocks around each step (perf_counter
  and process_time, the same span ``sbprof run`` calls a step), its total wall
  time and its peak resident set (the kernel's ``ru_maxrss`` of the child, from
  ``wait4``: no sbprof code measures the arms);
- ``sbprof``: ``sbprof run`` in its default, bounded mode on the same script: the
  measured steps it reports, the script's own clocks on those steps, and its
  peak resident set;
- ``continue``: ``sbprof run --continue``: the script runs to its end; its total
  wall time and peak resident set.

Printed, as the median [q1, q3] over rounds of each round's ratio:

- measured steps: sbprof's median measured step / the unprofiled run's median of
  the same steps (its own clock), in CPU and wall time; and the script's own
  clock on those steps under sbprof / unprofiled (bar 1.05);
- ``--continue`` total wall / unprofiled total wall (bar 1.10), and the same of the
  process's CPU time (user + system, from ``wait4``: other work on the machine
  does not stretch it), peak RSS (bar 1.25);
- the default run's peak RSS / the unprofiled run's (bar 1.25).

Workloads: ``mlp`` (8 x Linear(512, 512) + ReLU, batch 64, SGD) and ``tiny``
(a forward of 3,000 tiny operators: the worst case for a trace), one thread.

Run: ``python benchmarks/run_overhead.py [--rounds 5] [--workload mlp tiny] [--steps 1500]`` (the workload runs
as ``python benchmarks/run_overhead.py --loop ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("plain", "sbprof", "continue")


def loop(args: argparse.Namespace) -> None:
    """The training loop; its own (wall, CPU) seconds per step go to ``--times`` as JSON, each step as it ends."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.workload == "mlp":
        layers: List[torch.nn.Module] = []
        for _ in range(8):
            layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
        model: torch.nn.Module = torch.nn.Sequential(*layers)
        data = [(torch.randn(64, 512), torch.randn(64, 512)) for _ in range(8)]
    else:
        model = tiny_model()
        data = [(torch.zeros(1), torch.zeros(1)) for _ in range(8)]
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(data * (args.steps // 8 + 1), batch_size=None)
    times: List[List[float]] = []
    for step, (x, y) in enumerate(loader):
        if step == args.steps:
            break
        start, cpu = time.perf_counter(), time.process_time()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append([time.perf_counter() - start, time.process_time() - cpu])
        if step < 20:  # the steps sbprof's default run measures: kept as they end (it stops the script later)
            Path(args.times).write_text(json.dumps(times))
    Path(args.times).write_text(json.dumps(times))


def tiny_model() -> Any:
    """A model whose forward is 3,000 ``x = x + 1`` on a 1-element tensor, times a weight."""
    import torch

    class TinyOps(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

        def forward(self, x: Any) -> Any:
            for _ in range(3000):
                x = x + 1
            return x * self.w
    return TinyOps()


def run_arm(arm: str, workload: str, folder: Path, steps: int) -> Dict[str, Any]:
    """One fresh process of ``arm``: its total wall time, peak RSS, the script's own step times, sbprof's record."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    times = folder / f"{arm}.json"
    script = [str(Path(__file__).resolve()), "--loop", "--workload", workload, "--steps", str(steps), "--times",
              str(times)]
    prefix = {"plain": [], "sbprof": ["-m", "sbprof", "run", "--output_folder", str(folder / arm)],
              "continue": ["-m", "sbprof", "run", "--continue", "--output_folder", str(folder / arm)]}[arm]
    start = time.perf_counter()
    with open(folder / f"{arm}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, *prefix, *script], env=env, stdout=log, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{arm} failed ({proc.returncode}): see {folder / f'{arm}.log'}")
    result: Dict[str, Any] = {"wall_s": wall, "rss": usage.ru_maxrss * 1024, "own": json.loads(times.read_text()),
                              "cpu_s": usage.ru_utime + usage.ru_stime}
    if arm != "plain":
        record = json.loads((folder / arm / "results.json").read_text())["records"][0]
        result["record"] = record
    return result


def quartiles(values: List[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):.3f} [{q[0]:.3f}, {q[2]:.3f}]"


def round_ratios(arms: Dict[str, Dict[str, Any]]) -> Dict[str, float]:
    """One round's ratios (see the module docstring)."""
    plain, profiled, going = arms["plain"], arms["sbprof"], arms["continue"]
    record = profiled["record"]
    roles = record["extra"]["roles"]
    measured = [i for i, role in enumerate(roles) if role == "measured"]

    def own(arm: Dict[str, Any], clock: int) -> float:
        return statistics.median(arm["own"][i][clock] for i in measured)
    return {"measured CPU (sbprof's figure)": statistics.median(record["cpu_s"]) / own(plain, 1),
            "measured wall (sbprof's figure)": statistics.median(record["wall_s"]) / own(plain, 0),
            "measured CPU (the script's clock)": own(profiled, 1) / own(plain, 1),
            "--continue total wall": going["wall_s"] / plain["wall_s"],
            "--continue total CPU": going["cpu_s"] / plain["cpu_s"],
            "--continue peak RSS": going["rss"] / plain["rss"],
            "default run peak RSS": profiled["rss"] / plain["rss"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--times", default=None, help=argparse.SUPPRESS)
    p.add_argument("--workload", nargs="+", default=["mlp", "tiny"], choices=["mlp", "tiny"])
    p.add_argument("--steps", type=int, default=1500, help="steps of the script (its whole run)")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    if args.loop:
        args.workload = args.workload[0]
        loop(args)
        return
    for workload in args.workload:
        ratios: Dict[str, List[float]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                arms: Dict[str, Dict[str, Any]] = {}
                for arm in ARMS[r % len(ARMS):] + ARMS[:r % len(ARMS)]:
                    folder = Path(tmp) / f"{workload}{r}"
                    folder.mkdir(exist_ok=True)
                    arms[arm] = run_arm(arm, workload, folder, args.steps)
                for name, value in round_ratios(arms).items():
                    ratios.setdefault(name, []).append(value)
                plain = arms["plain"]
                print(f"{workload} round {r + 1}: plain {plain['wall_s']:.1f} s {plain['rss'] / 2**20:.0f} MiB; "
                      + ", ".join(f"{k} {v[-1]:.3f}" for k, v in ratios.items()), flush=True)
        print(f"\n{workload}: median [q1, q3] over {args.rounds} rounds of each round's ratio to the unprofiled run")
        print("| ratio | value | bar |\n|---|---|---|")
        bars = {"--continue total wall": 1.10, "--continue total CPU": 1.10, "--continue peak RSS": 1.25,
                "default run peak RSS": 1.25}
        for name, values in ratios.items():
            print(f"| {name} | {quartiles(values)} | {bars.get(name, 1.05)} |")
        print()

if __name__ == "__main__":
    main()
