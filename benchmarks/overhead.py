"""Overhead of each profiling decorator on a realistic training step, side by side.

A real SpeechBrain ``Brain`` (a small conv + GRU acoustic model, ~10 ms per
forward/backward/optimiser step on one CPU thread) is built once per mode;
``fit_batch`` is called on the same batch for the plain Brain and for each
decorated one, in interleaved rounds so drift and noise hit all modes alike.
Each round yields one paired ratio (decorated / plain step time); we print the
median ratio and its IQR over rounds. Schedules record every measured step
(``wait=0``; the one warm-up step falls in the warm-up calls) so the figures are the cost while recording, the worst
case; outside a schedule's active steps the cost is near zero.

Run: ``python benchmarks/overhead.py [--rounds 40] [--threads 1]``
"""
from __future__ import annotations

import argparse
import time

import speechbrain as sb
import torch

import sbprof
from sbprof.stats import summarise


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
    "plain": lambda b: b,
    "profile(activities=())": lambda b: sbprof.profile(b, activities=()),
    "profile": lambda b: sbprof.profile(b),
    "profile_optimiser": lambda b: sbprof.profile_optimiser(b, wait=0, warmup=1, active=10**6),
    "profile_analyst": lambda b: sbprof.profile_analyst(b, wait=0, warmup=1, active=10**6),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--steps", type=int, default=2, help="steps per mode per round")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    batch = [torch.randn(4, 60, 40, generator=g), torch.randint(0, 32, (4, 30), generator=g)]
    brains = {name: make(make_brain()) for name, make in MODES.items()}
    for brain in brains.values():
        brain.init_optimizers()
    for brain in brains.values():  # warm up: allocator, first-call costs, profiler start
        for _ in range(3):
            brain.fit_batch(batch)
        if getattr(brain, "profiler", None) is not None:
            brain.profiler.stop()
    per_round = {name: [] for name in brains}
    for r in range(args.rounds):
        order = list(brains) if r % 2 == 0 else list(reversed(brains))
        for name in order:
            brain = brains[name]
            # One torch profiler can run per process at a time: each decorated
            # Brain's session is opened and closed around its own steps, outside
            # the timed region (as Brain.fit does around an epoch).
            prof = getattr(brain, "profiler", None)
            if prof is not None:
                prof.start()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                brain.fit_batch(batch)
            per_round[name].append((time.perf_counter() - t0) / args.steps)
            if prof is not None:
                prof.stop()
    plain = summarise(per_round["plain"])
    print(f"plain fit_batch step: median {plain.median * 1e3:.2f} ms (IQR {plain.iqr * 1e3:.2f} ms), "
          f"{args.rounds} rounds x {args.steps} steps, {args.threads} thread(s)")
    print(f"{'mode':<24}{'median ratio':>14}{'IQR':>8}{'overhead':>10}")
    for name in brains:
        if name == "plain":
            continue
        ratios = summarise([d / p for d, p in zip(per_round[name], per_round["plain"])])
        print(f"{name:<24}{ratios.median:>14.3f}{ratios.iqr:>8.3f}{(ratios.median - 1) * 100:>9.1f}%")


if __name__ == "__main__":
    main()
