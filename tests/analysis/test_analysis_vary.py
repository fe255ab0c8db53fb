"""The loss check of ``sbprof run --vary`` for variants that change the script's own arguments, on records whose
losses are known: arguments the script ignores leave every loss as the base's (compared: 0 %), a batch size changes
them (not compared, still ranked), a loss that is not finite is flagged whatever the arguments.
"""
from __future__ import annotations

import math

from sbprof.analysis.vary import analyse
from sbprof.record import Cell, Measurement
from sbprof.record.results import Results

BASE_LOSSES = [4.0, 3.0, 2.0]
VARIANTS = {  # name: (its arguments, its first run's losses, its step time in seconds)
    "base": ([], BASE_LOSSES, 0.10),
    "--ignored 1": (["--ignored", "1"], BASE_LOSSES, 0.10),
    "--batch_size 4": (["--batch_size", "4"], [5.2, 3.9, 2.6], 0.05),
    "--lr 1e9": (["--lr", "1e9"], [4.0, None, None], 0.04),
}


def _record(name: str, run: int, losses, step_s: float) -> Measurement:
    steps = 3
    return Measurement(label=f"{name}:train", cell=Cell(model="train", variant="train", params={"variant": name},
                                                        run=run),
                       wall_s=[step_s] * steps, cpu_s=[step_s] * steps,
                       extra={"roles": ["measured"] * steps, "data_wait_s": [0.0] * steps, "between_s": [0.0] * steps,
                              "utterances": [1] * steps, "audio_s": [2.0] * steps, "losses": losses})


def _results() -> Results:
    variants = [{"name": n, "args": a, "changes": [["args", " ".join(a)]]} for n, (a, _, _) in VARIANTS.items()]
    records = [_record(n, r, losses, step) for n, (_, losses, step) in VARIANTS.items() for r in range(4)]
    return Results(job="vary", rules={"variants": variants, "loss_tolerance": 0.02, "rounds": 4}, records=records)


def test_arguments_that_leave_the_losses_alone_are_compared_others_not_and_a_non_finite_loss_is_flagged():
    report = analyse(_results())
    by_name = {v.name: v for v in report.variants}
    ignored, bigger, diverged = by_name["--ignored 1"], by_name["--batch_size 4"], by_name["--lr 1e9"]
    assert ignored.loss_compared and ignored.loss_change == 0.0 and ignored.loss_steps == 3 and ignored.loss_ok
    assert not bigger.loss_compared and bigger.loss_change is None and bigger.loss_ok  # other batches: 30 % apart
    assert diverged.loss_compared and math.isinf(diverged.loss_change) and not diverged.loss_ok
    # 0.05 s a step against 0.10: 2x the audio seconds per second; the diverged one, faster still, is never ranked
    assert report.winner == "--batch_size 4" and "--lr 1e9" not in report.ranking
    assert abs(bigger.figures["audio_per_s"].ratio.ratio - 2.0) < 1e-9
