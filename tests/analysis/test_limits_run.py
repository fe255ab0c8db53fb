"""The run and train analyses' "What limits this", from records built with known figures (the rules themselves:
sbprof/analysis/limits.py; the same verdicts on real runs: tests/run/test_run_limits.py and
tests/distributed/test_distributed_limits.py)."""
from __future__ import annotations

import pytest

from sbprof.analysis.limits import THRESHOLDS
from sbprof.analysis.run import analyse
from sbprof.analysis.train import SINGLE_UNDECIDED, analyse as analyse_train
from sbprof.record import Cell, Measurement, Results
from sbprof.report.run import render_run


def _stage(wait_s, step_s, steps=5, warmup=1, **extra):
    return Measurement("s:train", Cell(model="s", variant="train"), warmup=warmup, wall_s=[step_s] * steps,
                       cpu_s=[step_s] * steps, extra={"kind": "loop", "data_wait_s": [9.0] * warmup + wait_s, **extra})


def _rules(report):
    return [v.rule for v in report.limits.verdicts]


def test_data_wait_fires_from_its_median_beside_the_median_step():
    # Warm-up waits (9 s) left out; 30 ms a step beside a 10 ms step: 75 % of (wait + step) in a record that holds
    # no time between (an older sbprof's).
    report = analyse(Results("run", records=[_stage([0.03, 0.03, 0.031, 0.029, 0.03], 0.01)]))
    (v,) = report.limits.verdicts
    assert v.rule == "data loading" and v.sentence.startswith("Stage `train`: Waiting for data takes 75 %")
    assert {f.name: f.value for f in v.figures} == {"data wait": 0.03, "step": 0.01, "wait share": 0.75}


def test_data_wait_is_read_as_a_share_of_the_loop_with_the_time_between():
    # 20 ms wait, 60 ms between (preprocessing outside the step), 20 ms step: the wait is 20 % of the loop, not the
    # 50 % of (wait + step); the warm-up step's figures (9 s) are left out.
    report = analyse(Results("run", records=[_stage([0.02] * 5, 0.02, between_s=[9.0] + [0.06] * 5)]))
    (s,) = report.stages
    assert (s.loop.wait_share, s.loop.between_share, s.loop.step_share) == pytest.approx((0.2, 0.6, 0.2))
    (v,) = report.limits.verdicts
    assert v.sentence == "Stage `train`: Waiting for data takes 20 % of the loop (20.0 ms wait, 60.0 ms between, " \
                         "20.0 ms step)."


def test_a_wait_under_the_threshold_fires_nothing():
    share = THRESHOLDS["data loading"].value
    wait = 0.01 * share / (1 - share) * 0.9  # 90 % of the wait that would reach the threshold
    assert _rules(analyse(Results("run", records=[_stage([wait] * 5, 0.01)]))) == []


def test_dispatch_bound_fires_from_operators_cpu_per_operator_and_the_floor():
    # 10,000 operators in a 50 ms step of CPU: 5 µs each, beside a 4 µs floor (1.25x, under 3x).
    tiny = _stage([0.0] * 6, 0.05, operators_per_step=10000.0, dispatch_floor_s=4e-6)
    report = analyse(Results("run", records=[tiny]))
    assert _rules(report) == ["dispatch-bound"]
    assert report.stages[0].cpu_per_operator_s == pytest.approx(5e-6)
    # One large product: a few operators, each far above the floor.
    big = _stage([0.0] * 6, 0.05, operators_per_step=40.0, dispatch_floor_s=4e-6)
    assert _rules(analyse(Results("run", records=[big]))) == []


def test_results_without_the_dispatch_figures_say_why_instead_of_guessing():
    report = analyse(Results("run", records=[_stage([0.0] * 6, 0.05)]))
    assert report.limits.verdicts == [] and report.limits.undecided[0].startswith("dispatch-bound (train): no "
                                                                                   "operator count")
    text = render_run(report)
    assert text.rstrip().endswith("its figures come from the tables above.")
    assert "No rule fired" in text and "Not decided: dispatch-bound (train)" in text


def test_train_without_worlds_says_why_no_rule_applies():
    summary = analyse_train(Results("train", records=[Measurement("train:ctc", Cell(model="ctc"), wall_s=[0.1])]))
    assert summary.limits.verdicts == [] and summary.limits.undecided == [SINGLE_UNDECIDED]


def _rank(rank, comm_s):
    cell = Cell(model="ctc", device="cpu", threads=1, rank=rank, params={"world_size": 2, "scaling": "strong"})
    return Measurement(f"ctc:rank{rank}", cell, wall_s=[0.1] * 5,
                       extra={"rank": {"steps": list(range(5)), "comm_s": [comm_s] * 5}})


def test_train_shows_each_worlds_verdicts_naming_the_world():
    # Rank 0 spends 30 ms of each 100 ms step in the all-reduce waiting for rank 1: rank 1 costs every step 30 ms.
    summary = analyse_train(Results("train", records=[_rank(0, 0.031), _rank(1, 0.001)]))
    (v,) = summary.limits.verdicts
    assert v.rule == "straggler"
    assert v.sentence == ("World of 2 (ctc on cpu, strong, run 0): Rank 1 is slowest and costs every step 30.0 ms, "
                          "30 % of the 100 ms step.")
