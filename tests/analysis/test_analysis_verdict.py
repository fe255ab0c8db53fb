"""The regression gate's verdict, checked against scipy's Mann-Whitney test and constructed runs."""
import itertools
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from sbprof.analysis.verdict import compare_runs, mann_whitney_cdf, run_statistic
from sbprof.base.errors import ConfigError


@pytest.mark.parametrize("m,n", [(1, 3), (3, 4), (5, 2), (4, 4)])
def test_null_distribution_matches_enumeration(m, n):
    # U = number of (x, y) pairs with x > y; under the null every ranking is equally likely.
    counts = np.zeros(m * n + 1)
    for xs in itertools.combinations(range(m + n), m):
        ys = [r for r in range(m + n) if r not in xs]
        counts[sum(x > y for x in xs for y in ys)] += 1
    assert np.allclose(mann_whitney_cdf(m, n), np.cumsum(counts) / counts.sum())


def test_null_distribution_matches_scipy_exact_p_values():
    rng = np.random.default_rng(3)
    cdf = mann_whitney_cdf(7, 9)
    for _ in range(20):
        x, y = rng.normal(size=7), rng.normal(size=9)
        u = int(sum(a > b for a in x for b in y))
        assert cdf[u] == pytest.approx(mannwhitneyu(x, y, alternative="less", method="exact").pvalue)


def test_large_samples_stay_finite_and_normalised():
    cdf = mann_whitney_cdf(60, 80)  # C(140, 60) overflows float64 without renormalisation
    assert np.all(np.isfinite(cdf)) and cdf[-1] == pytest.approx(1.0)
    # The median of U is m*n/2 by symmetry.
    assert cdf[60 * 80 // 2 - 1] < 0.5 <= cdf[60 * 80 // 2]


def test_interval_is_the_set_of_shifts_the_rank_test_accepts():
    rng = np.random.default_rng(5)
    base = [[float(x)] for x in np.exp(rng.normal(0, 0.1, 8))]
    cand = [[float(x)] for x in np.exp(rng.normal(0.05, 0.1, 9))]
    v = compare_runs(base, cand)
    lb, lc = np.log([r[0] for r in base]), np.log([r[0] for r in cand])

    def p_value(ratio):
        return mannwhitneyu(lc - math.log(ratio), lb, alternative="two-sided", method="exact").pvalue

    eps = 1e-9
    assert p_value(v.low * (1 + eps)) > 0.05 and p_value(v.high * (1 - eps)) > 0.05
    assert p_value(v.low * (1 - eps)) <= 0.05 and p_value(v.high * (1 + eps)) <= 0.05
    assert v.confidence >= 0.95
    # Hodges-Lehmann: the median of all 72 candidate / baseline ratios, an even count, so the
    # geometric mean of the middle two.
    ratios = sorted(c[0] / b[0] for c in cand for b in base)
    assert v.ratio == pytest.approx(math.sqrt(ratios[35] * ratios[36]), rel=1e-12)


def _runs(rng, runs, factor=1.0, batches=10):
    """Runs with 10% between-process CV and ~+-3% quartiles within a run."""
    return [list(factor * math.exp(rng.normal(0, 0.1)) * np.exp(rng.normal(0, 0.045, batches)))
            for _ in range(runs)]


def test_constructed_verdicts():
    rng = np.random.default_rng(11)
    base = _runs(rng, 12)
    regressed = compare_runs(base, _runs(rng, 12, factor=1.4))
    improved = compare_runs(base, _runs(rng, 12, factor=0.6))
    unchanged = compare_runs(base, _runs(rng, 12))
    assert regressed.verdict == "regressed" and regressed.low > 1 and regressed.ratio > 1.05
    assert improved.verdict == "improved" and improved.high < 1
    assert unchanged.verdict == "unchanged" and unchanged.low < 1 < unchanged.high
    assert "includes 1" in unchanged.reason
    assert (regressed.baseline_runs, regressed.candidate_runs) == (12, 12)


def test_real_change_below_threshold_is_unchanged():
    base = [[1.0 + 0.001 * i] for i in range(8)]
    cand = [[1.02 * x[0]] for x in base]  # 2% slower, no noise: significant but below 5%
    v = compare_runs(base, cand, threshold=0.05)
    assert v.verdict == "unchanged" and v.low > 1 and "within the 5% threshold" in v.reason
    assert compare_runs(base, cand, threshold=0.01).verdict == "regressed"


def test_higher_is_better_metrics_turn_the_verdict():
    base = [[10.0 + 0.1 * i] for i in range(6)]
    faster = [[2 * x[0]] for x in base]  # RTFx doubled
    assert compare_runs(base, faster, lower_is_better=False).verdict == "improved"
    assert compare_runs(faster, base, lower_is_better=False).verdict == "regressed"


def test_pooled_batches_cry_wolf_where_runs_do_not():
    # Identical code, 6 runs a side: a rank test on pooled batch samples calls about half of
    # the pairs different (between-process noise), the verdict over runs almost never.
    rng = np.random.default_rng(2)
    pooled_alarms = run_alarms = 0
    trials = 200
    for _ in range(trials):
        base, cand = _runs(rng, 6), _runs(rng, 6)
        flat_b, flat_c = np.concatenate(base), np.concatenate(cand)
        pooled_alarms += mannwhitneyu(flat_c, flat_b, alternative="two-sided").pvalue < 0.05
        run_alarms += compare_runs(base, cand).verdict != "unchanged"
    assert pooled_alarms / trials > 0.35
    assert run_alarms / trials <= 0.05


def test_too_few_runs_is_a_clear_error():
    with pytest.raises(ConfigError, match="1 baseline and 1 candidate runs .* at least 4 fresh-process runs"):
        compare_runs([1.0, 1.1, 0.9], [1.0, 1.2, 1.1])  # flat lists: one process each
    # 3 a side: the most extreme ranking has probability 2 / C(6, 3) = 10%, so at most 90%.
    with pytest.raises(ConfigError, match=r"3 baseline and 3 candidate runs .*\(at most 90.0%\)"):
        compare_runs([[1.0], [1.1], [0.9]], [[1.0], [1.2], [1.1]])
    with pytest.raises(ConfigError, match="at least 5 fresh-process runs"):  # 2 / C(8, 4) = 2.9% > 1%
        compare_runs([[1.0]] * 4, [[1.0]] * 4, confidence=0.99)
    assert compare_runs([[1.0], [1.1], [0.9], [1.05]], [[1.0], [1.2], [1.1], [0.95]]).confidence >= 0.95


@pytest.mark.parametrize("base,kwargs", [([[1.0], [0.0]], {}), ([[1.0], []], {}), ([], {}),
                                         ([[1.0]] * 4, dict(threshold=-0.1)), ([[1.0]] * 4, dict(confidence=0))])
def test_bad_inputs(base, kwargs):
    with pytest.raises(ConfigError):
        compare_runs(base, [[1.0]] * 4, **kwargs)


def _contended_runs(rng, runs, factor=1.0, calls=100):
    """Runs of a shared machine: quiet calls at ``factor`` +-1%, and in each run a stretch of
    10-80% of its calls slowed 1.4x by another tenant (as seen here within one process)."""
    out = []
    for _ in range(runs):
        level = np.where(np.arange(calls) < rng.integers(10, 81), 1.4, 1.0)
        out.append(list(factor * level * np.exp(rng.normal(0, 0.01, calls))))
    return out


def test_a_low_percentile_sees_through_episodes_of_contention_that_move_run_medians():
    rng = np.random.default_rng(5)
    trials, caught, false_alarms = 100, {"median": 0, "p10": 0}, 0
    for _ in range(trials):
        base, same, slow = (_contended_runs(rng, 6), _contended_runs(rng, 6), _contended_runs(rng, 6, factor=1.1))
        for statistic in caught:
            caught[statistic] += compare_runs(base, slow, statistic=statistic).verdict == "regressed"
        false_alarms += compare_runs(base, same, statistic="p10").verdict == "regressed"
    assert caught["p10"] / trials >= 0.9 and caught["median"] / trials <= 0.5, caught
    assert false_alarms / trials <= 0.05  # the bound holds whatever each run is reduced to
    v = compare_runs(base, slow, statistic="p10")
    assert v.statistic == "p10" and "run p10s" in v.method and v.ratio == pytest.approx(1.1, rel=0.03)


def test_run_statistics_are_exact_order_statistics():
    run = [9.0, 1.0, 5.0, 3.0, 7.0]  # sorted 1 3 5 7 9
    assert run_statistic("median")(run) == 5.0 and run_statistic("min")(run) == 1.0
    assert run_statistic("p25")(run) == 3.0 and run_statistic("p10")(run) == pytest.approx(1.8)
    assert run_statistic("p2.5")(run) == pytest.approx(1.2)


@pytest.mark.parametrize("name", ["p0", "p100", "mean", "pten", "", "10"])
def test_unknown_run_statistics_are_refused(name):
    with pytest.raises(ConfigError, match="is not one of median, min, or pNN"):
        compare_runs([[1.0]] * 4, [[1.0]] * 4, statistic=name)
