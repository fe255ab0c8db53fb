"""Overhead of each profiling decorator on a realistic training step, side by side.

A real SpeechBrain ``Brain`` (a small conv + GRU acoustic model, ~10 ms per
forward/backward/optimiser step on one CPU thread) is built once per mode;
``fit_batch`` is called on the same batch for a plain Brain and a decorated
one, in interleaved rounds so drift and noise hit both alike, each mode in a
fresh process. Each round yields one paired ratio (decorated / plain step
time); we print the median ratio and its IQR over rounds. Schedules record every measured step
(``wait=0``; the one warm-up step falls in the warm-up calls) so the figures are the cost while recording, the worst
case; outside a schedule's active steps the cost is near zero. An
undecorated Brain is compared too, as a control: its ratio shows what the
method reads when there is no overhead at all.

Run: ``python benchmarks/overhead.py [--rounds 40] [--threads 1]``
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import speechbrain as sb
import torch

import sbprof
from sbprof.base.stats import summarise


class Acoustic(torch.nn.Module):
    """Conv front end + GRU + CTC-sized output: the shape of a small ASR model."""

    def __init__(self, n_mels: int = 40, hidden: int = 128, vocab: int = 32):
        super().__init__()
        self.conv = torch.nn.Sequential(torch.nn.Conv1d(n_mels, hidden, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.Conv1d(hidden, hidden, 3, stride=2, padding=1), torch.nn.ReLU())
        self.rnn = torch.nn.GRU(hidden, hidden, batch_first=True)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        x = self.conv(feats.transpose(1, 2)).transpose(1, 2)
        return self.out(self.rnn(x)[0]).log_softmax(-1)


class AcousticBrain(sb.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.nll_loss(predictions.flatten(0, 1), batch[1].flatten())


def make_brain() -> AcousticBrain:
    torch.manual_seed(0)
    return AcousticBrain({"model": Acoustic()}, lambda p: torch.optim.Adam(p, 1e-3),
                         run_opts={"device": "cpu"})


MODES = {
    # An undecorated Brain against another: the noise floor of the method.
    "control (undecorated)": lambda b: b,
    "profile(activities=())": lambda b: sbprof.profile(b, activities=()),
    "profile": lambda b: sbprof.profile(b),
    "profile_optimiser": lambda b: sbprof.profile_optimiser(b, wait=0, warmup=1, active=10**6),
    "profile_analyst": lambda b: sbprof.profile_analyst(b, wait=0, warmup=1, active=10**6),
}


def paired_ratios(mode: str, rounds: int, steps: int) -> tuple:
    """Interleave plain and ``mode`` steps; return (plain step times, paired ratios)."""
    g = torch.Generator().manual_seed(0)
    batch = [torch.randn(4, 60, 40, generator=g), torch.randint(0, 32, (4, 30), generator=g)]
    brains = {"plain": make_brain(), mode: MODES[mode](make_brain())}
    for brain in brains.values():
        brain.init_optimizers()
        for _ in range(3):  # warm up: allocator, first-call costs, profiler start
            brain.fit_batch(batch)
        if getattr(brain, "profiler", None) is not None:
            brain.profiler.stop()
    times = {name: [] for name in brains}
    for r in range(rounds):
        for name in (brains if r % 2 == 0 else reversed(list(brains))):
            brain = brains[name]
            # One profiler session per round, opened and closed outside the timed
            # region, as Brain.fit does around an epoch.
            prof = getattr(brain, "profiler", None)
            if prof is not None:
                prof.start()
            t0 = time.perf_counter()
            for _ in range(steps):
                brain.fit_batch(batch)
            times[name].append((time.perf_counter() - t0) / steps)
            if prof is not None:
                prof.stop()
    return times["plain"], [d / p for d, p in zip(times[mode], times["plain"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--steps", type=int, default=2, help="steps per mode per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES),
                        help="decorators to compare with plain")
    parser.add_argument("--worker", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        plain, ratios = paired_ratios(args.worker, args.rounds, args.steps)
        print(json.dumps({"plain": plain, "ratios": ratios}))
        return
    # Each mode runs in a fresh process beside its own plain Brain: a torch
    # profiler session leaves background work behind that would otherwise slow
    # whatever runs next in the same process and blur the comparison.
    print(f"fit_batch of a conv+GRU Brain, {args.rounds} rounds x {args.steps} steps, {args.threads} thread(s); "
          "ratio = decorated / plain step time, paired per round")
    print(f"{'mode':<24}{'plain step':>12}{'median ratio':>14}{'IQR':>8}{'overhead':>10}")
    for mode in args.modes:
        out = subprocess.run([sys.executable, __file__, "--worker", mode, "--rounds", str(args.rounds),
                              "--steps", str(args.steps), "--threads", str(args.threads)],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        plain, ratios = summarise(result["plain"]), summarise(result["ratios"])
        print(f"{mode:<24}{plain.median * 1e3:>9.2f} ms{ratios.median:>14.3f}{ratios.iqr:>8.3f}"
              f"{(ratios.median - 1) * 100:>9.1f}%")


if __name__ == "__main__":
    main()
