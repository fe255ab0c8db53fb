"""Weighted least squares against numpy.polyfit and scipy.stats.linregress."""
import numpy as np
import pytest
from scipy.stats import linregress

from sbprof.analysis.lsq import fit_linear, t_quantile
from sbprof.base.errors import ConfigError


def test_t_quantile_matches_tables():
    assert t_quantile(0.95, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(0.90, 5) == pytest.approx(2.015, abs=1e-3)
    with pytest.raises(ConfigError):
        t_quantile(0.95, 0)


def test_weighted_fit_matches_polyfit():
    rng = np.random.default_rng(0)
    x = np.linspace(1, 10, 12)
    y = 2 + 0.5 * x + 0.1 * x ** 2 + rng.normal(0, 0.2, x.size)
    w = 1 / y ** 2
    fit = fit_linear(np.column_stack([np.ones_like(x), x, x ** 2]), y, weights=w)
    # polyfit's weights multiply the residuals: sqrt of inverse variances.
    expected = np.polyfit(x, y, 2, w=np.sqrt(w))[::-1]
    assert np.allclose(fit.coefficients, expected, rtol=1e-9)
    assert fit.dof == 9


def test_slope_interval_matches_linregress():
    rng = np.random.default_rng(1)
    x = np.arange(10.0)
    y = 3 - 0.7 * x + rng.normal(0, 0.5, x.size)
    fit = fit_linear(np.column_stack([np.ones_like(x), x]), y)
    ref = linregress(x, y)
    lo, hi = fit.coefficient_interval(1, 0.95)
    half = t_quantile(0.95, 8) * ref.stderr
    assert (lo, hi) == (pytest.approx(ref.slope - half), pytest.approx(ref.slope + half))
    assert fit.value([1.0, 4.0]) == pytest.approx(ref.intercept + 4 * ref.slope)
    assert fit.value_se([1.0, 0.0]) == pytest.approx(ref.intercept_stderr)


def test_rank_deficient_and_too_few_rows_are_refused():
    with pytest.raises(ConfigError, match="cannot tell the terms apart"):
        fit_linear([[1, 2], [2, 4], [3, 6]], [1.0, 2.0, 3.0], names=["B*L", "B*L^2"])
    with pytest.raises(ConfigError, match="2 observations cannot determine 3 terms"):
        fit_linear([[1, 1, 1], [1, 2, 4]], [1.0, 2.0])
    with pytest.raises(ConfigError):
        fit_linear([[1, 1], [1, 2]], [1.0, float("nan")])
