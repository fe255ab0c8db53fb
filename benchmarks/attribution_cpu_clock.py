"""Cost of the process CPU clock in per-module attribution: hooks with and without it, side by side.

Light attribution reads the host clock (``perf_counter_ns``, user space, ~0.1 us)
and the process CPU clock (``process_time_ns``, one system call, ~0.6 us) at
every module boundary and backward mark. This script times the same step
three ways in one process, in interleaved rounds (the order rotates every
round, so drift hits all alike): no attribution, attribution with the CPU
clock replaced by a constant (what the hooks cost without it), and attribution
as shipped. It prints the median per-round ratios and the CPU clock's cost per
module call (median per-round difference / calls per step).

Two steps, forward + backward, one thread:

- ``tiny``: 200 ``Linear(8, 8)`` in a row, every one a row: the worst case (hooks dominate);
- ``conformer``: a 2-layer torchaudio Conformer (d 64) on 2 x 200 frames, the default selection.

Run: ``python benchmarks/attribution_cpu_clock.py [--rounds 40]``
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List, Tuple

import torch

import sbprof.measuring.modules.attribution as attribution_module
from sbprof.measuring.modules import ModuleAttribution


def tiny() -> Tuple[torch.nn.Module, Callable[[], torch.Tensor], object]:
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(200)])
    x = torch.randn(4, 8, requires_grad=True)
    return model, lambda: model(x), "*"


def conformer() -> Tuple[torch.nn.Module, Callable[[], torch.Tensor], object]:
    import torchaudio

    model = torchaudio.models.Conformer(input_dim=64, num_heads=4, ffn_dim=128, num_layers=2,
                                        depthwise_conv_kernel_size=15)
    x, lengths = torch.randn(2, 200, 64), torch.tensor([200, 180])
    return model, lambda: model(x, lengths)[0], "default"


STEPS = {"tiny": tiny, "conformer": conformer}


def timed(call: Callable[[], torch.Tensor], steps: int, attribution: ModuleAttribution = None) -> float:
    """Mean ms of ``steps`` forward + backward steps, under ``attribution`` when given."""
    if attribution is not None:
        attribution.__enter__()
    start = time.perf_counter_ns()
    for _ in range(steps):
        if attribution is not None:
            with attribution.step("s"):
                call().sum().backward()
        else:
            call().sum().backward()
    elapsed = (time.perf_counter_ns() - start) / 1e6 / steps
    if attribution is not None:
        attribution.close()
    return elapsed


def compare(name: str, rounds: int, steps: int) -> Dict[str, List[float]]:
    model, call, select = STEPS[name]()
    real = attribution_module.cpu_now
    calls = 0

    def run(way: str) -> float:
        nonlocal calls
        if way == "plain":
            return timed(call, steps)
        attribution_module.cpu_now = real if way == "with CPU clock" else (lambda: 0)
        try:
            attribution = ModuleAttribution(model, modules=select)
            result = timed(call, steps, attribution)
            calls = int(sum(r.calls for r in attribution.breakdown("s").rows))
            return result
        finally:
            attribution_module.cpu_now = real

    ways = ["plain", "without CPU clock", "with CPU clock"]
    times: Dict[str, List[float]] = {w: [] for w in ways}
    for r in range(-2, rounds):  # two unrecorded rounds first
        order = ways[r % 3:] + ways[:r % 3]
        for way in order:
            value = run(way)
            if r >= 0:
                times[way].append(value)
    times["calls"] = [calls]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--steps", type=int, default=5, help="steps per way per round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"process_time_ns vs perf_counter_ns; {args.rounds} rounds x {args.steps} steps; forward + backward, "
          "1 thread; ratios are medians of per-round ratios")
    print(f"{'step':<11}{'calls':>6}{'plain ms':>10}{'hooks ms':>10}{'+CPU ms':>10}"
          f"{'hooks/plain':>13}{'+CPU/hooks':>12}{'+CPU/plain':>12}{'us/call':>9}")
    for name in STEPS:
        t = compare(name, args.rounds, args.steps)
        plain, off, on = t["plain"], t["without CPU clock"], t["with CPU clock"]
        med = statistics.median
        per_call = med(a - b for a, b in zip(on, off)) * 1e3 / t["calls"][0]  # paired per round
        print(f"{name:<11}{t['calls'][0]:>6}{med(plain):>10.2f}{med(off):>10.2f}{med(on):>10.2f}"
              f"{med(o / p for o, p in zip(off, plain)):>13.3f}{med(a / b for a, b in zip(on, off)):>12.3f}"
              f"{med(a / p for a, p in zip(on, plain)):>12.3f}{per_call:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
