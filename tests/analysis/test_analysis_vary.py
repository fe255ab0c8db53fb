"""The loss check of ``sbprof run --vary`` on losses that are known: for variants that change the script's own
arguments, arguments the script ignores leave every loss as the base's (compared: 0 %), a batch size changes them
(not compared, still ranked), a loss that is not finite is flagged whatever the arguments; and a loss that fell a
thousandfold is not judged by its last digits, while a real change (bf16 on a CTC loss) still is.
"""
from __future__ import annotations

import math

import pytest

from sbprof.analysis.vary import analyse, loss_change
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


# The first 8 training losses of two of SpeechBrain's integration examples, read by sbprof run --vary (1 thread
# against 2; fp32 against bf16 autocast), same seed, same batches.
SPEAKER_ID_1_THREAD = [0.68286, 0.0784768, 0.000674187, 6.49209e-05, 3.28413e-05, 2.24556e-05, 1.49159e-05, 1.06244e-05]
SPEAKER_ID_2_THREADS = [0.68286, 0.0786485, 0.000728577, 5.87675e-05, 2.81775e-05, 1.90582e-05, 1.32171e-05,
                        9.80486e-06]
ASR_CTC_FP32 = [14.7738, 16.6584, 14.817, 12.7061, 13.8277, 12.2618, 8.45523, 7.41836]
ASR_CTC_BF16 = [14.7725, 17.4578, 17.5237, 14.7628, 15.6448, 14.6491, 11.6927, 12.3776]


def test_a_loss_that_fell_a_thousandfold_is_not_judged_by_its_last_digits_a_real_change_still_is():
    # Two threads sum in another order: after the loss fell from 0.68 to 1e-5, its last digits differ by 15 % of
    # themselves, 0.00017 of 0.68 at most (step 2). bf16 moves CTC's loss by 5 (of 17) within 8 steps.
    assert loss_change(SPEAKER_ID_1_THREAD, SPEAKER_ID_2_THREADS) == pytest.approx((0.0786485 - 0.0784768) / 0.68286)
    assert loss_change(ASR_CTC_FP32, ASR_CTC_BF16) == pytest.approx((12.3776 - 7.41836) / 16.6584, rel=1e-6)
    step_by_step = max(abs(v - b) / b for b, v in zip(SPEAKER_ID_1_THREAD, SPEAKER_ID_2_THREADS))
    assert step_by_step > 0.14  # what a comparison with each step's own loss read: flagged at any tolerance < 14 %


def test_two_runs_a_side_give_no_ratio_and_the_report_says_why():
    from sbprof.report.vary import render_vary

    variants = [{"name": n, "args": a, "changes": [["args", " ".join(a)]]} for n, (a, _, _) in VARIANTS.items()]
    records = [_record(n, r, losses, step) for n, (_, losses, step) in VARIANTS.items() for r in range(2)]
    report = analyse(Results(job="vary", rules={"variants": variants, "loss_tolerance": 0.02, "rounds": 2},
                             records=records))
    figure = next(v for v in report.variants if v.name == "--ignored 1").figures["audio_per_s"]
    assert figure.ratio is None and figure.no_ratio == "2 run(s) a side: an interval needs 3"
    assert report.variants[0].figures["audio_per_s"].no_ratio is None  # the base has no ratio to explain
    assert "n/a (2 run(s) a side: an interval needs 3)" in render_vary(report) and report.winner is None
