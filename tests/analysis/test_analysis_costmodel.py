"""The sweep cost model on synthetic grids with known coefficients."""
import math

import numpy as np
import pytest

from scipy import stats

from sbprof.analysis.costmodel import CostPoint, fit_cost_model, held_out_errors, predict, reach, validate_held_out
from sbprof.base.errors import ConfigError

BATCHES = (1, 2, 4, 8)
SECONDS = (1, 2, 5, 8, 16)
K = (0.05, 0.01, 0.0005)


def truth(b, s):
    return K[0] + K[1] * b * s + K[2] * b * s * s


def triangle(b_index, s_index):
    # sbprof's triangle rule for a 5 x 4 grid: skip when d > 0, b > 0 and d + b >= 4.5.
    return not (s_index > 0 and b_index > 0 and s_index + b_index >= (len(SECONDS) + len(BATCHES)) / 2)


def grid(rng=None, rel=0.0):
    cells_in, cells_out = [], []
    for bi, b in enumerate(BATCHES):
        for si, s in enumerate(SECONDS):
            noise = math.exp(rng.normal(0, rel)) if rng is not None else 1.0
            (cells_in if triangle(bi, si) else cells_out).append(CostPoint(b, s, truth(b, s) * noise))
    return cells_in, cells_out


def test_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    fit_on, held = grid(rng, rel=0.02)
    model = fit_cost_model(fit_on + held)
    assert model.terms == ("1", "B*L", "B*L^2") and model.dropped_terms == ()
    for got, want in zip(model.coefficients, K):
        assert got == pytest.approx(want, rel=0.15)
    assert model.sigma_rel == pytest.approx(0.02, rel=0.5)
    assert "*B*L^2" in model.formula()


def test_exact_triangle_predicts_the_corner_exactly():
    fit_on, held = grid()
    report = validate_held_out(fit_on, held)
    assert len(report.cells) == len(held) > 0
    assert report.median_abs_rel_error < 1e-9
    assert all(c.inside for c in report.cells)


def test_calibrated_intervals_cover_held_out_cells_and_bounds_hold():
    # The right form with 5 % noise: the triangle's held-out errors calibrate the corner's intervals.
    rng = np.random.default_rng(1)
    inside = total = 0
    widths = []
    for _ in range(300):
        fit_on, held = grid(rng, rel=0.05)
        for c in validate_held_out(fit_on, held, confidence=0.95).cells:
            if c.prediction.beyond is not None:
                assert c.inside  # a bound from measured cells below: the cost never falls as B or L grows
                continue
            inside += c.inside
            total += 1
            widths.append(math.log(c.prediction.high / c.prediction.value))
    assert total > 1000 and inside / total >= 0.95
    # Conservative on a model of the right form (the reach factor assumes errors grow away from the data):
    # a median half-width of about 25 % at 5 % noise, the price of holding on real models whose form is not.
    assert 0.15 < float(np.median(widths)) < 0.35


def test_the_interval_replays_the_held_out_errors():
    """The interval from its definition: t(n-1) * rms(log error / reach) * sqrt(1 + 1/n) * reach, each held-out
    error recomputed here from a fit without the cell."""
    rng = np.random.default_rng(3)
    cells, _ = grid(rng, rel=0.05)
    errors = held_out_errors(cells)
    n = len(errors)
    leave_one_out = [e for e in errors if e.ratio <= 1]
    assert len(leave_one_out) >= len(cells) - 1  # every cell, less those whose fit fails
    for e in errors[:3]:  # spot-check the errors themselves against a fit made here
        rest = [c for c in cells if c != e.cell]
        smaller = [c for c in rest if c.batch_size * c.seconds < e.cell.batch_size * e.cell.seconds]
        fits = [fit_cost_model(f).value(e.cell.batch_size, e.cell.seconds) for f in (rest, smaller) if len(f) > 3]
        assert any(math.log(e.cell.value / v) == pytest.approx(e.log_error) for v in fits)
    scale = math.sqrt(sum((e.log_error / reach(e.ratio)) ** 2 for e in errors) / n)
    _, (inner, outer) = predict(cells, [(2, 5), (4, 8)])
    largest = max(c.batch_size * c.seconds for c in cells)
    for p, ratio in ((inner, 10 / largest), (outer, 32 / largest)):
        half = stats.t.ppf(0.975, n - 1) * scale * math.sqrt(1 + 1 / n) * (1 + math.log2(max(ratio, 1)))
        assert math.log(p.high / p.value) == pytest.approx(half) == pytest.approx(math.log(p.value / p.low))
    assert outer.reach > inner.reach == 1


def test_cells_too_far_out_are_lower_bounds_from_the_cells_below():
    cells = [CostPoint(b, s, truth(b, s)) for b in (1, 2) for s in (1, 2, 4)]  # largest B*L: 8
    _, (far, unbounded) = predict(cells, [(8, 8), (0.5, 0.5)])
    assert far.value is None and far.high is None and far.beyond.startswith("extrapolated 8x beyond")
    assert far.low == truth(2, 4)  # the largest measured cell with B <= 8 and L <= 8
    assert far.holds(truth(8, 8)) and not far.holds(0.5 * truth(2, 4))
    assert unbounded.beyond is None  # inside the range: a number
    _, (told,) = predict(cells, [(2, 8)], beyond={(2, 8): "past the cache"})
    assert told.beyond == "past the cache" and told.low == truth(2, 4)
    _, (few,) = predict(cells[:5], [(2, 4)], terms=("1", "B*L"))
    assert few.beyond is None or few.beyond.startswith("too few measured cells")


def test_negative_term_is_dropped_and_said():
    # Linear truth, the longest lengths measured 3% low: the L^2 term comes out negative.
    cells = [CostPoint(b, s, (0.1 + 0.02 * b * s) * (0.97 if s == 16 else 1.0)) for b in BATCHES for s in SECONDS]
    model = fit_cost_model(cells)
    assert model.dropped_terms == ("B*L^2",) and model.terms == ("1", "B*L")
    assert all(c >= 0 for c in model.coefficients)
    assert model.value(16, 32) > 0


def test_too_few_cells_is_a_clear_error_and_no_prediction():
    with pytest.raises(ConfigError, match="3 measured cells are too few .* at least 4"):
        fit_cost_model([CostPoint(1, 1, 0.1), CostPoint(2, 1, 0.2), CostPoint(1, 2, 0.3)])
    one_length = [CostPoint(b, 2, truth(b, 2)) for b in BATCHES]  # B*L and B*L^2 proportional
    with pytest.raises(ConfigError, match="cannot tell the terms apart"):
        fit_cost_model(one_length)
    with pytest.raises(ConfigError, match="unknown cost-model terms"):
        fit_cost_model(grid()[0], terms=("1", "L^3"))
    with pytest.raises(ConfigError):
        fit_cost_model([CostPoint(1, 1, 0.0)] * 5)
    with pytest.raises(ConfigError):
        validate_held_out(grid()[0], [])
