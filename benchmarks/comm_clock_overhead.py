"""What sbprof run's communication clock costs a DDP step: the same steps with DDP's built-in all-reduce, with
PyTorch's own default hook in Python, and with the clock's hook, in one process per rank, in rotating blocks.

Two gloo ranks (``torchrun --standalone --nproc_per_node=2``, one thread each) build three DDP models from the same
weights, ``--bucket_mb`` buckets (1 MB: six a step, as a Python hook costs per bucket; DDP's default is 25 MB,
one bucket for this model): DDP's built-in all-reduce; PyTorch's
``allreduce_hook`` registered as a Python comm hook; and, once the clock is installed, the clock's timed default
hook. They train in rotating blocks of ``--steps`` steps, ``--rounds`` rounds, on the same batch; each block's
median step (wall and CPU time of the process) is kept. Prints, per rank, the median over rounds of the ratios to
the built-in arm, with their quartiles. Noise on a shared machine is a few per cent per round, so read the medians,
and the clock against PyTorch's own Python hook.

Run: ``python benchmarks/comm_clock_overhead.py [--rounds 12 --steps 20 --bucket_mb 1]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = '''
import json, statistics, sys, time, torch, torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from sbprof.distributed.comm_clock import CommClock
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, rounds, steps = dist.get_rank(), int(sys.argv[2]), int(sys.argv[3])
def model():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 8))
    return torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=float(sys.argv[4]))
plain, python_hook = model(), model()
python_hook.register_comm_hook(None, allreduce_hook)  # PyTorch's own default hook, in Python: the reference
clock = CommClock().install()
clocked = model()
x, y = torch.randn(64, 256), torch.randn(64, 8)
arms = (plain, python_hook, clocked)
opts = {id(m): torch.optim.SGD(m.parameters(), lr=0.01) for m in arms}
def block(m):
    walls, cpus = [], []
    for _ in range(steps):
        w, c = time.perf_counter(), time.process_time()
        opts[id(m)].zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opts[id(m)].step()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)
for m in arms:  # warm-up
    block(m)
ratios = []
for r in range(rounds):
    order = arms[r % 3:] + arms[:r % 3]
    got = {id(m): block(m) for m in order}
    ratios.append([got[id(m)][i] / got[id(plain)][i] for m in (python_hook, clocked) for i in (0, 1)])
json.dump(ratios, open(f"{sys.argv[1]}/ratios{rank}.json", "w"))
'''


def quartiles(values):
    values = sorted(values)
    n = len(values)
    return values[n // 4], values[n // 2], values[(3 * n) // 4]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bucket_mb", type=float, default=1.0, help="DDP's bucket_cap_mb (its default is 25)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sbprof-clock-") as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        for key in ("RANK", "WORLD_SIZE"):
            env.pop(key, None)
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        str(script), tmp, str(args.rounds), str(args.steps), str(args.bucket_mb)], env=env,
                       check=True,
                       capture_output=True)
        print(f"{args.rounds} rounds of {args.steps} steps per arm, 2 gloo ranks, {args.bucket_mb:g} MB buckets, load "
              f"{os.getloadavg()[0]:.1f}\n")
        print("| rank | arm / built-in | wall time, median [q1, q3] | CPU time, median [q1, q3] |")
        print("|---|---|---|---|")
        for rank in (0, 1):
            ratios = json.loads((Path(tmp) / f"ratios{rank}.json").read_text())
            for name, first in (("PyTorch's allreduce_hook", 0), ("sbprof's clock", 2)):
                wall = quartiles([r[first] for r in ratios])
                cpu = quartiles([r[first + 1] for r in ratios])
                print(f"| {rank} | {name} | {wall[1]:.3f} [{wall[0]:.3f}, {wall[2]:.3f}] | "
                      f"{cpu[1]:.3f} [{cpu[0]:.3f}, {cpu[2]:.3f}] |")


if __name__ == "__main__":
    main()
