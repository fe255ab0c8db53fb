"""Cost of counting FLOPs, as a ratio to one plain forward, beside torch's FlopCounterMode.

Small Conformer encoders (the shape of sbprof's default ASR model: d=144,
4 heads, feed-forward 576, kernel 31, 6 layers; torchaudio's ``Conformer``
and SpeechBrain's ``ConformerEncoder`` with ``regularMHA``) run inference
(``eval()``, ``torch.no_grad()``) on a batch of encoder frames (25 per second
of audio after a 4x subsampling front end). In each round the plain forward,
``sbprof.measuring.flops.count_flops`` and ``FlopCounterMode`` each run once, in a
rotating order, so drift and noise hit all alike; each counted call is
divided by the plain forward of the same round, and the median ratio (and
its quartiles) over rounds is printed. The target is a ratio <= 1.5.

Every operator reaching the dispatcher pays the Python dispatch mode both
counters are built on (a fixed cost per operator), so the ratio grows as
the work per operator shrinks: it is printed for short and long inputs, with
the operators per call and the cost per operator, and beside it the "dispatch
floor": a dispatch mode that does nothing but count operators, the least any
counter built on one can cost. The first counting call
of a process also pays a one-off import of torch's dispatch machinery,
printed separately.

Run: ``python benchmarks/flops_cost.py [--rounds 21] [--threads 1] [--backward]``
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from sbprof.measuring.flops import count_flops
from sbprof.base.stats import summarise

D_MODEL, HEADS, FFN, LAYERS, KERNEL = 144, 4, 576, 6, 31
FRAMES_PER_S = 25


def torchaudio_conformer() -> torch.nn.Module:
    import torchaudio

    model = torchaudio.models.Conformer(input_dim=D_MODEL, num_heads=HEADS, ffn_dim=FFN, num_layers=LAYERS,
                                        depthwise_conv_kernel_size=KERNEL)

    class Encoder(torch.nn.Module):  # lengths = all frames
        def __init__(self):
            super().__init__()
            self.conformer = model

        def forward(self, x):
            return self.conformer(x, torch.full((x.shape[0],), x.shape[1]))[0]

    return Encoder()


def speechbrain_conformer() -> torch.nn.Module:
    from speechbrain.lobes.models.transformer.Conformer import ConformerEncoder

    return ConformerEncoder(num_layers=LAYERS, d_model=D_MODEL, d_ffn=FFN, nhead=HEADS, kernel_size=KERNEL,
                            attention_type="regularMHA")


class _OpCounter(TorchDispatchMode):
    """A dispatch mode that only counts operators: the floor any dispatch-level counter pays."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # as sbprof's counter does
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def modes(model: torch.nn.Module, x: torch.Tensor, backward: bool) -> Dict[str, Callable[[], None]]:
    """The plain call and the two counted ones; with ``backward``, forward + backward each."""
    def plain() -> None:
        with torch.set_grad_enabled(backward):
            out = _first(model(x))
            if backward:
                torch.autograd.grad(out, list(model.parameters()), torch.ones_like(out), allow_unused=True)

    def sbprof() -> None:
        with torch.set_grad_enabled(backward):
            count_flops(model, x, backward=backward)

    def flop_counter_mode() -> None:
        with FlopCounterMode(display=False):
            plain()

    def dispatch_floor() -> None:
        with _OpCounter():
            plain()

    return {"plain": plain, "sbprof": sbprof, "FlopCounterMode": flop_counter_mode, "dispatch floor": dispatch_floor}


def run(name: str, model: torch.nn.Module, audio_s: float, batch: int, rounds: int, backward: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(batch, int(audio_s * FRAMES_PER_S), D_MODEL)
    calls = modes(model, x, backward)
    for fn in calls.values():  # warm-up: allocator, first-call costs
        for _ in range(3):
            fn()
    with _OpCounter() as ops:
        calls["plain"]()
    ratios: Dict[str, List[float]] = {"sbprof": [], "FlopCounterMode": [], "dispatch floor": []}
    plain_s: List[float] = []
    order = list(calls)
    for r in range(rounds):
        times = {}
        for key in order[r % len(order):] + order[:r % len(order)]:
            start = time.perf_counter()
            calls[key]()
            times[key] = time.perf_counter() - start
        plain_s.append(times["plain"])
        for key in ratios:
            ratios[key].append(times[key] / times["plain"])
    base = statistics.median(plain_s)
    cells = []
    for key, values in ratios.items():
        s = summarise(values)
        per_op_us = (s.median - 1) * base / ops.calls * 1e6
        cells.append(f"{s.median:.2f} [{s.q1:.2f}, {s.q3:.2f}] ({per_op_us:.0f} us/op)")
    print(f"| {name} | {audio_s:g} s x {batch} | {x.shape[1]} | {base * 1e3:.1f} | {ops.calls} | "
          + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backward", action="store_true", help="count (and time) forward + backward")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = {"torchaudio Conformer": torchaudio_conformer(), "SpeechBrain ConformerEncoder": speechbrain_conformer()}
    for model in models.values():
        model.train(args.backward)
    first = next(iter(models.values()))
    start = time.perf_counter()
    with torch.no_grad():
        count_flops(first, torch.randn(1, 25, D_MODEL))
    print(f"first count_flops call of the process: {time.perf_counter() - start:.2f} s (one-off imports)")
    print(f"threads: {args.threads}, rounds: {args.rounds}, {'forward + backward' if args.backward else 'forward'}; "
          f"ratio = counted call / plain call of the same round, median [q1, q3]")
    print("| model | audio x batch | frames | plain ms | operators | sbprof ratio | FlopCounterMode ratio "
          "| dispatch floor ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, model in models.items():
        for audio_s, batch in ((2.0, 1), (8.0, 4), (32.0, 1)):
            run(name, model, audio_s, batch, args.rounds, args.backward)


if __name__ == "__main__":
    main()
