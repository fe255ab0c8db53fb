"""Overhead of per-module attribution (light and detailed modes) on a ~10 ms SpeechBrain training step.

The step is ``fit_batch`` of the training recipe's CTC Brain (Fbank, CNN front
end, a 2-layer Conformer in TransformerASR, CTC head and loss: SpeechBrain's
own layers) made small: one utterance of about half a second. Each mode runs in a fresh process
beside a plain Brain, in interleaved rounds (the order flips every round, so
drift hits both alike); each round gives one paired ratio, decorated / plain
step time, and we print the median ratio and its IQR.

Modes (all with the decorator, which times each step):

- ``profile(activities=())``: the decorator alone, no attribution (reference);
- ``light``: ``profile(activities=(), modules="default")``: clocks at module
  boundaries, forward and backward, no operator recording;
- ``profile()``: torch.profiler records every operator (no attribution);
- ``detailed``: ``profile(modules="default")``: operator recording plus a
  ``record_function`` label per module, forward and backward.

An undecorated Brain is compared too, as a control of the method.

The cost is per module boundary (a wrapper around each selected module's
forward, and a hook on the autograd node found at its entry and exit), so
it grows with the number of rows: ``--select`` picks fewer (e.g.
``'enc.transformer.encoder.layers.*'``).

Run: ``python benchmarks/attribution_overhead.py [--rounds 60] [--threads 1] [--select PATTERN ...]``
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch

import sbprof
from sbprof.base.stats import summarise
from sbprof.train.brains import CTCBrain
from sbprof.train.data import mock_batches
from sbprof.train.models import ModelSizes, build_modules

SIZES = ModelSizes(n_mels=40, d_model=64, num_layers=2, nhead=4, d_ffn=128, kernel_size=15, vocab_size=64)

SELECT = ["default"]  # set from --select
MODES = {
    "control (undecorated)": lambda b: b,
    "profile(activities=())": lambda b: sbprof.profile(b, activities=()),
    "light": lambda b: sbprof.profile(b, activities=(), modules=SELECT),
    "profile()": lambda b: sbprof.profile(b),
    "detailed": lambda b: sbprof.profile(b, modules=SELECT),
}


def make_brain() -> CTCBrain:
    return CTCBrain(build_modules("ctc", SIZES, 16000, seed=0), lambda p: torch.optim.Adam(p, 1e-3),
                    run_opts={"device": "cpu", "noprogressbar": True})


def paired_ratios(mode: str, rounds: int, steps: int) -> tuple:
    """Interleave plain and ``mode`` steps; return (plain step times, paired ratios, labels per step)."""
    batch = mock_batches(1, 1, scale=0.5 / 13.7, sample_rate=16000, vocab_size=SIZES.vocab_size, seed=0).batches[0]
    brains = {"plain": make_brain(), mode: MODES[mode](make_brain())}
    for brain in brains.values():
        brain.init_optimizers()
        brain.modules.train()
    times = {name: [] for name in brains}
    for r in range(-3, rounds):  # three unrecorded rounds first: allocator, first calls, profiler start
        for name in (brains if r % 2 == 0 else reversed(list(brains))):
            brain = brains[name]
            # One profiler session per round, opened and closed outside the timed
            # region, as Brain.fit does around an epoch (and the attribution's hooks with it).
            prof = getattr(brain, "profiler", None)
            attribution = getattr(prof, "modules", None)
            if prof is not None:
                prof.start()
            if attribution is not None:
                attribution.__enter__()
            t0 = time.perf_counter()
            for _ in range(steps):
                brain.fit_batch(batch)
            elapsed = (time.perf_counter() - t0) / steps
            if prof is not None:
                prof.stop()
            if attribution is not None:
                attribution.close()
            if r >= 0:
                times[name].append(elapsed)
    labels = 0
    attribution = getattr(getattr(brains[mode], "profiler", None), "modules", None)
    if attribution is not None:
        labels = len(attribution.breakdown("train").rows) - 2  # not optimizer and (other)
    return times["plain"], [d / p for d, p in zip(times[mode], times["plain"])], labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--steps", type=int, default=2, help="steps per mode per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--select", nargs="+", default=["default"],
                        help="modules attributed in light/detailed modes (default: the default selection, 22 rows)")
    parser.add_argument("--worker", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    SELECT[:] = args.select
    if args.worker:
        plain, ratios, labels = paired_ratios(args.worker, args.rounds, args.steps)
        print(json.dumps({"plain": plain, "ratios": ratios, "labels": labels}))
        return
    print(f"fit_batch of a small Conformer CTC Brain, {args.rounds} rounds x {args.steps} steps, "
          f"{args.threads} thread(s); ratio = decorated / plain step time, paired per round")
    print(f"{'mode':<24}{'rows':>6}{'plain step':>12}{'median ratio':>14}{'IQR':>8}{'overhead':>10}")
    for mode in args.modes:
        out = subprocess.run([sys.executable, __file__, "--worker", mode, "--rounds", str(args.rounds),
                              "--steps", str(args.steps), "--threads", str(args.threads), "--select", *args.select],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        plain, ratios = summarise(result["plain"]), summarise(result["ratios"])
        print(f"{mode:<24}{result['labels'] or '':>6}{plain.median * 1e3:>9.2f} ms{ratios.median:>14.3f}"
              f"{ratios.iqr:>8.3f}{(ratios.median - 1) * 100:>9.1f}%", flush=True)


if __name__ == "__main__":
    main()
