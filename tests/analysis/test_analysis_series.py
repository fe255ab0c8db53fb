"""Comparison records as series: pooled figures, growth laws of known exponent, crossovers found independently."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from helpers.compare_fakes import record, results_of
from sbprof.analysis.series import build_series, find_crossovers, point_energy, x_value
from sbprof.record import Energy

SIZES = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
# Deterministic multiplicative scatter, mean 1, so the fitted exponent is not exact by construction.
SCATTER = [0.97, 1.03, 1.01, 0.99, 1.02, 0.98]


def power_records(variant, a, b, runs=3):
    return [record(variant, n, r, [a * n ** b * SCATTER[(i + r) % 6] * f for f in (0.99, 1.0, 1.01)])
            for i, n in enumerate(SIZES) for r in range(runs)]


def test_growth_exponent_of_synthetic_power_law_is_recovered_with_its_interval():
    series, = build_series(results_of(power_records("quad", 0.003, 1.5), models=["quad"]))
    b = series.power.coefficients[1]
    low, high = series.power.exponent_interval
    assert abs(b - 1.5) < 0.03 and low < 1.5 < high and high - low < 0.1
    assert series.growth.best.form == "power"
    assert [p.x for p in series.points] == SIZES and all(p.runs == 3 for p in series.points)


def test_linear_cost_is_told_from_a_power_law():
    records = [record("lin", n, r, [0.05 + 0.01 * n]) for n in SIZES for r in range(2)]
    series, = build_series(results_of(records))
    assert series.growth.best.form == "linear"
    a, b = series.growth.best.coefficients
    assert a == pytest.approx(0.05, rel=1e-9) and b == pytest.approx(0.01, rel=1e-9)


def test_point_pools_runs_median_of_run_medians_and_quartiles_of_all_calls():
    runs = [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [10.0, 11.0, 12.0]]
    records = [record("v", 2.0, r, samples, peak=int(1e9 * (r + 1)), added=int(1e6 * (r + 1)))
               for r, samples in enumerate(runs)]
    point, = build_series(results_of(records))[0].points
    pooled = np.array(runs).ravel()
    assert point.median_s == 3.0  # run medians 2, 3, 11
    assert (point.q1_s, point.q3_s) == (np.percentile(pooled, 25), np.percentile(pooled, 75))
    assert (point.run_min_s, point.run_max_s, point.samples) == (2.0, 11.0, 9)
    assert point.rtfx == pytest.approx(2.0 / 3.0)
    assert point.peak_memory_gb == pytest.approx(2.0) and point.batch_memory_gb == pytest.approx(0.002)


def test_energy_is_per_call_and_median_over_runs_or_not_measurable_with_reasons():
    e1 = Energy(2.0, 0.0, 2.0, {"cpu:package-0": 11.0}, {"cpu:package-0": "rapl"}, calls=11)
    e2 = Energy(2.0, 0.0, 2.0, {"cpu:package-0": 22.0}, {"cpu:package-0": "rapl"}, calls=11)
    measured = point_energy([e1, e2])
    assert measured.joules_per_call == {"cpu:package-0": 1.5} and measured.watts == {"cpu:package-0": 8.25}
    none = point_energy([Energy(1.0, 0.0, 1.0, unavailable={"rapl": "no /sys/class/powercap"})])
    assert not none.measurable and none.describe() == "not measurable here (rapl: no /sys/class/powercap)"


def test_crossover_matches_an_independent_root_finder():
    records = ([record("lin", n, 0, [0.05 + 0.01 * n]) for n in SIZES]
               + [record("pow", n, 0, [0.003 * n ** 1.5]) for n in SIZES])
    series = build_series(results_of(records, models=["lin", "pow"]))
    crossing, = find_crossovers(series)
    truth = brentq(lambda n: 0.003 * n ** 1.5 - (0.05 + 0.01 * n), 1.0, 32.0, xtol=1e-14)
    assert crossing.at == pytest.approx(truth, rel=1e-9)
    assert (crossing.faster_below, crossing.faster_above) == ("pow", "lin")
    assert [s.variant for s in series] == ["lin", "pow"]  # the comparison's order, not alphabetical by chance


def test_no_crossover_when_one_variant_is_faster_everywhere():
    records = ([record("fast", n, 0, [0.01 * n]) for n in SIZES] + [record("slow", n, 0, [0.02 * n]) for n in SIZES])
    assert find_crossovers(build_series(results_of(records))) == []


def test_failed_points_are_listed_and_too_few_points_leave_the_law_unfitted():
    records = [record("v", 1.0, 0, [0.1]), record("v", 2.0, 0, [0.2]), record("v", 4.0, 0, [], status="oom")]
    series, = build_series(results_of(records))
    (x, failed), = series.failures
    assert x == 4.0 and failed.status == "oom"  # the record itself: renderers word it
    assert series.growth is None and "at least 3 distinct sizes" in series.growth_note
    assert series.power is not None and series.power.exponent_interval is None  # 2 points: no interval
    assert math.isclose(series.power.coefficients[1], 1.0)


@pytest.mark.parametrize("vary, x", [("audio_s", 0.5), ("batch_size", 4.0), ("frames", 300.0)])
def test_x_value_reads_the_varied_coordinate(vary, x):
    assert x_value(record("v", x, 0, [1.0], vary=vary), vary) == x
