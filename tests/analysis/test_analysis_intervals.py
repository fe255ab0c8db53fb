"""Intervals over fresh-process runs and the adaptive-repeats policy."""
import math

import numpy as np
import pytest

from sbprof.analysis.intervals import RepeatPolicy, interval_over_runs, next_run_interval, summarise_runs
from sbprof.errors import ConfigError


def test_hand_computed_interpolated_interval():
    # n = 6 at 95%: [x1, x6] has level 1 - 2/64 = 0.96875, [x2, x5] has 1 - 2*7/64 = 0.78125.
    # Hettmansperger-Sheather: I = (0.96875 - 0.95) / (0.96875 - 0.78125) = 0.1,
    # lambda = (6 - 1) * 0.1 / (1 + (6 - 2) * 0.1) = 0.5 / 1.4.
    lam = 0.5 / 1.4
    iv = interval_over_runs([6.0, 1.0, 5.0, 2.0, 4.0, 3.0])
    assert iv.low == pytest.approx(1 + lam) and iv.high == pytest.approx(6 - lam)
    assert (iv.median, iv.min, iv.max, iv.runs, iv.confidence) == (3.5, 1.0, 6.0, 6, 0.95)
    assert iv.minmax_confidence == pytest.approx(1 - 2 / 64)
    assert iv.half_width_rel == pytest.approx((6 - lam - 3.5) / 3.5)


def test_few_runs_give_min_max_with_their_exact_level():
    iv = interval_over_runs([1.0, 1.3, 1.1, 0.9, 1.2])
    assert (iv.low, iv.high) == (0.9, 1.3)
    assert iv.confidence == pytest.approx(1 - 2 / 32)  # 93.75%: 5 runs cannot reach 95%
    single = interval_over_runs([2.0])
    assert (single.low, single.high, single.confidence, single.half_width_rel) == (2.0, 2.0, 0.0, 0.0)


@pytest.mark.parametrize("runs", [6, 10, 20])
@pytest.mark.parametrize("sigma", [0.1, 0.6])
def test_coverage_of_the_true_median_is_close_to_nominal(runs, sigma):
    # Lognormal run medians with a known median of 1 (sigma 0.1 is the 10% CV seen here,
    # 0.6 a strongly skewed case): the 95% interval must cover 1 in about 95% of experiments.
    rng = np.random.default_rng(runs * 100 + int(sigma * 10))
    trials = 2000
    covered = sum(
        iv.low <= 1.0 <= iv.high
        for iv in (interval_over_runs(np.exp(rng.normal(0.0, sigma, runs)).tolist()) for _ in range(trials))
    )
    assert 0.93 <= covered / trials <= 0.975


def test_hand_computed_next_run_interval():
    # logs of [e^-0.1, 1, e^0.1, e^0.2]: mean 0.05, sample sd sqrt(0.05 / 3); t(3, 97.5%) = 3.182446.
    medians = [math.exp(-0.1), 1.0, math.exp(0.1), math.exp(0.2)]
    iv = next_run_interval(medians)
    half = 3.182446 * math.sqrt(0.05 / 3) * math.sqrt(math.pi / 4)
    centre = (1.0 + math.exp(0.1)) / 2
    assert iv.low == pytest.approx(centre * math.exp(-half), rel=1e-5)
    assert iv.high == pytest.approx(centre * math.exp(half), rel=1e-5)
    assert (iv.median, iv.confidence, iv.runs, iv.min, iv.max) == (centre, 0.95, 4, medians[0], medians[-1])
    single = next_run_interval([2.0])
    assert (single.low, single.high, single.confidence) == (2.0, 2.0, 0.0)


@pytest.mark.parametrize("runs", [3, 4, 6, 10])
@pytest.mark.parametrize("sigma", [0.1, 0.3])
def test_next_run_interval_holds_on_a_repeat(runs, sigma):
    # Two independent sweeps of `runs` lognormal run medians: the second sweep's median must fall inside
    # the first's 95% interval in about 95% of experiments. The confidence interval for the median does
    # not (it covers the true median, not another estimate of it): that is why reports print this one.
    rng = np.random.default_rng(runs * 100 + int(sigma * 10))
    trials = 2000
    hits = ci_hits = 0
    for _ in range(trials):
        first, second = (np.exp(rng.normal(0.0, sigma, runs)).tolist() for _ in range(2))
        repeat = float(np.median(second))
        iv, ci = next_run_interval(first), interval_over_runs(first)
        hits += iv.low <= repeat <= iv.high
        ci_hits += ci.low <= repeat <= ci.high
    assert 0.93 <= hits / trials <= 0.985
    assert ci_hits / trials < 0.9


def test_within_target():
    iv = interval_over_runs([1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.002])
    assert iv.within(0.03) and not iv.within(0.001)


def test_summarise_runs_keeps_run_medians_and_within_run_spread():
    runs = [[1.0, 1.2, 0.8, 1.1, 0.9], [2.0, 2.0, 2.0], [3.0, 3.3, 2.7]]
    s = summarise_runs(runs)
    assert s.run_medians == [1.0, 2.0, 3.0]
    # Per-run IQR / median: 0.2 / 1, 0 / 2, 0.3 / 3 -> median 0.1.
    assert s.within_run_iqr_rel == pytest.approx(0.1)
    assert s.interval.median == 2.0 and s.to_dict()["interval"]["runs"] == 3
    assert s.interval.method != s.median_interval.method
    assert (s.median_interval.low, s.median_interval.high) == (1.0, 3.0)  # 3 runs: min-max


@pytest.mark.parametrize("bad", [[], [1.0, math.nan]])
def test_bad_run_medians(bad):
    with pytest.raises(ConfigError):
        interval_over_runs(bad)
    with pytest.raises(ConfigError):
        interval_over_runs([1.0, 2.0], confidence=1.0)
    with pytest.raises(ConfigError):
        summarise_runs([[1.0], []])


def _run_until_stop(policy, draw):
    medians = []
    while True:
        decision = policy.decide(medians)
        if not decision.add_run:
            return medians, decision
        medians.append(draw())


def test_policy_stops_at_target_when_runs_agree():
    rng = np.random.default_rng(0)
    policy = RepeatPolicy(target_rel=0.03, min_runs=3, max_runs=20)
    medians, decision = _run_until_stop(policy, lambda: float(np.exp(rng.normal(0, 0.002))))
    # Tiny spread: the target is met as soon as the minimum number of runs is reached.
    assert len(medians) == 3 and decision.target_met is True
    assert decision.interval.half_width_rel <= 0.03 and "target met" in decision.reason


def test_policy_stops_at_cap_with_between_process_noise():
    rng = np.random.default_rng(1)
    policy = RepeatPolicy(target_rel=0.03, min_runs=3, max_runs=10)
    medians, decision = _run_until_stop(policy, lambda: float(np.exp(rng.normal(0, 0.10))))
    # CV 10%: +-3% would need ~140 runs, so the cap stops it and says so.
    assert len(medians) == 10 and decision.target_met is False
    assert decision.interval.half_width_rel > 0.03 and "cap of 10 runs" in decision.reason


def test_policy_minimum_and_fixed_repeats():
    tight = [1.0] * 7
    assert RepeatPolicy(min_runs=8, max_runs=12).decide(tight).add_run  # below minimum
    assert "no interval yet" in RepeatPolicy(min_runs=1).decide([1.0]).reason
    fixed = RepeatPolicy.fixed(4)
    assert fixed.decide([1.0, 2.0, 3.0]).add_run
    done = fixed.decide([1.0, 2.0, 3.0, 4.0])
    assert not done.add_run and done.target_met is None and done.interval.runs == 4


@pytest.mark.parametrize("kwargs", [dict(target_rel=0), dict(min_runs=0), dict(min_runs=5, max_runs=4),
                                    dict(confidence=1.5)])
def test_policy_rejects_bad_settings(kwargs):
    with pytest.raises(ConfigError):
        RepeatPolicy(**kwargs)
