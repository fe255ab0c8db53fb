"""A plain PyTorch loop whose forward either runs many tiny operators (``--ops N``: ``x = x + 1`` N times on a
1-element tensor), one large matrix product (``--matmul N``: N x N by N x N) or one bare ``nn.Linear(N, N)``
(``--linear N``), compiled in place with ``--compile``; with ``--times FILE`` each step's own clocks (perf_counter
and process_time around the whole step) go to FILE as JSON, the tests' outside clock.

    python tiny_ops.py --steps 9 --ops 10000 [--device cuda] [--times times.json]
"""
import argparse
import json
import time

import torch


class Model(torch.nn.Module):
    def __init__(self, ops: int, matmul: int):
        super().__init__()
        self.ops = ops
        self.w = torch.nn.Parameter(torch.ones(max(matmul, 1), max(matmul, 1)))

    def forward(self, x):
        if self.ops:
            t = torch.zeros(1, device=self.w.device)
            for _ in range(self.ops):
                t = t + 1
            return (self.w * t).sum()
        return (x @ self.w).sum()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--ops", type=int, default=0)
    parser.add_argument("--matmul", type=int, default=0)
    parser.add_argument("--linear", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--times", default=None)
    parser.add_argument("--own_profiler", action="store_true", help="train under a torch.profiler of its own")
    parser.add_argument("--compile", action="store_true", help="the model compiled in place (nn.Module.compile)")
    args = parser.parse_args()
    if args.own_profiler:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            train(args)
        print(f"own profiler events: {len(profiler.events())}")
    else:
        train(args)


def train(args):
    torch.manual_seed(0)
    size = max(args.matmul, args.linear, 1)
    if args.linear:
        model = torch.nn.Linear(size, size).to(args.device)
    else:
        model = Model(args.ops, args.matmul).to(args.device)
    if args.compile:
        model.compile()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(size, size, device=args.device)
    times = []
    for _ in range(args.steps):
        start, cpu = time.perf_counter(), time.process_time()
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append([time.perf_counter() - start, time.process_time() - cpu])
        if args.times:  # each step as it ends: a run stopped by sbprof keeps its steps
            with open(args.times, "w") as f:
                json.dump(times, f)
    print(f"trained {args.steps} steps")


if __name__ == "__main__":
    main()
