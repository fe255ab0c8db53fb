"""Growth laws on synthetic data with known exponents, forms and crossovers."""
import math

import numpy as np
import pytest

from sbprof.analysis.growth import choose_growth_law, crossovers, fit_growth_form
from sbprof.base.errors import ConfigError

SIZES = [1, 2, 4, 8, 16, 32, 64]


def _noisy(rng, f, sizes=SIZES, rel=0.03):
    return [f(n) * math.exp(rng.normal(0, rel)) for n in sizes]


def test_power_law_recovers_a_known_exponent():
    rng = np.random.default_rng(0)
    fit = fit_growth_form("power", SIZES, _noisy(rng, lambda n: 2e-3 * n ** 1.7))
    lo, hi = fit.exponent_interval
    assert fit.coefficients[1] == pytest.approx(1.7, abs=0.03)
    assert lo < 1.7 < hi and hi - lo < 0.1
    assert fit.coefficients[0] == pytest.approx(2e-3, rel=0.1)
    assert fit.predict(10) == pytest.approx(fit.coefficients[0] * 10 ** fit.coefficients[1])


def test_exponent_interval_covers_the_truth_near_nominal():
    rng = np.random.default_rng(1)
    trials = 400
    hits = 0
    for _ in range(trials):
        lo, hi = fit_growth_form("power", SIZES, _noisy(rng, lambda n: 0.5 * n ** 1.2, rel=0.05)).exponent_interval
        hits += lo <= 1.2 <= hi
    assert 0.90 <= hits / trials <= 0.99


@pytest.mark.parametrize("truth,form", [
    (lambda n: 0.5 + 0.01 * n, "linear"),            # fixed overhead + per-frame work
    (lambda n: 0.2 + 1e-4 * n * n, "quadratic"),      # overhead + attention's square
    (lambda n: 0.01 * n ** 1.5, "power"),
])
def test_choice_finds_the_generating_form(truth, form):
    rng = np.random.default_rng(2)
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    choice = choose_growth_law(sizes, _noisy(rng, truth, sizes, rel=0.01))
    assert choice.best.form == form
    assert set(choice.fits) == {"power", "linear", "quadratic"}
    assert choice.best.loo_rel_error == min(f.loo_rel_error for f in choice.fits.values())


def test_known_crossovers_of_two_variants():
    sizes = [1, 3, 10, 30, 100, 300]
    # A: 0.2 + 1e-3 n^2, B: 0.1 n. They cross where n^2 - 100 n + 200 = 0.
    a = fit_growth_form("quadratic", sizes, [0.2 + 1e-3 * n * n for n in sizes])
    b = fit_growth_form("linear", sizes, [0.1 * n for n in sizes])
    roots = sorted([(100 - math.sqrt(9200)) / 2, (100 + math.sqrt(9200)) / 2])
    assert crossovers(a, b, 1, 300) == [pytest.approx(r, rel=1e-8) for r in roots]
    assert crossovers(a, b, 5, 50) == []


def test_too_few_points_and_bad_input():
    with pytest.raises(ConfigError, match="at least 3 distinct sizes"):
        fit_growth_form("quadratic", [1, 2, 2], [1.0, 2.0, 2.1])
    with pytest.raises(ConfigError, match="unknown growth form"):
        fit_growth_form("cubic", [1, 2, 3], [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError):
        fit_growth_form("power", [1, 2, 3], [1.0, -2.0, 3.0])
    with pytest.raises(ConfigError, match="no growth form can be judged"):
        choose_growth_law([1, 2], [1.0, 2.0])
    two = fit_growth_form("power", [1, 2], [1.0, 4.0])
    assert two.exponent_interval is None and math.isnan(two.loo_rel_error)
    with pytest.raises(ConfigError):
        crossovers(two, two, 10, 1)
