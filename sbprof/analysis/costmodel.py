"""A cost model of one sweep setting: time or memory from batch size B and seconds L.

The default form for both time per batch and peak memory is

    cost = k0 + k1 * B*L + k2 * B*L^2

- ``k0``: what does not grow with the input: per-call overhead (Python and
  operator dispatch, decoding set-up) for time; weights, runtime and
  allocator pools for memory;
- ``k1 * B*L``: work and activations proportional to the frames in the
  batch (convolutions, feed-forward layers, RNNs, CTC / greedy decoding);
- ``k2 * B*L^2``: self-attention's score matrices, one L x L map per
  utterance and head, hence quadratic in length but linear in batch size.

Other terms (``B``, ``L``) can be asked for. Cells span orders of magnitude,
so the fit is weighted least squares in relative error (weights 1/cost^2).
A term whose coefficient comes out negative has no physical meaning (and
would send extrapolations below zero): the most negative is dropped and the
model refitted until all are non-negative; dropped terms are reported.

Prediction intervals are calibrated on held-out cells, not taken from the
fit's own residuals (which describe interpolation and missed the measured
corner by 6-47 % on this machine: the last-level cache regime, a decoder's
B*L^2 term, heap reuse). Every measured cell is predicted once by the model
fitted without it (leave-one-out) and once by the model fitted on the
cells smaller than it (forward chaining, the way the corner is
extrapolated); each error ``log(measured / predicted)`` is scaled by the
*reach* of that prediction, ``1 + log2(r)`` where ``r`` is the cell's B*L
over the largest B*L it was predicted from (1 inside the range). A new
cell's interval is ``predicted * exp(+-t * s * sqrt(1 + 1/n) * reach)``,
with ``s`` the root mean square of the ``n`` scaled errors and Student's
``t``. A cell further out than twice the furthest reach so checked (or with
fewer than :data:`MIN_HELD_OUT` checks) gets no number: a lower bound, the
largest measured cell it dominates (cost never falls as B or L grows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sbprof.analysis.lsq import LinearFit, fit_linear, t_quantile
from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec

TERMS: Dict[str, Callable[[float, float], float]] = {
    "1": lambda b, s: 1.0,
    "B": lambda b, s: b,
    "L": lambda b, s: s,
    "B*L": lambda b, s: b * s,
    "B*L^2": lambda b, s: b * s * s,
}
DEFAULT_TERMS: Tuple[str, ...] = ("1", "B*L", "B*L^2")


@dataclass(frozen=True)
class CostPoint:
    """One measured cell: batch size, seconds of audio per utterance, cost (e.g. median s or bytes)."""

    batch_size: float
    seconds: float
    value: float


MIN_HELD_OUT = 3
"""Fewest held-out checks for a calibrated interval."""
SUPPORT = 2.0
"""A prediction may reach this many times further than the furthest held-out check."""


@dataclass(frozen=True)
class Prediction(Codec):
    """A predicted cell: a value with its calibrated interval, or only a lower bound (``beyond`` says why).

    ``reach``: how far beyond the fitted cells it lies (see the module
    docstring). For a bound, ``value`` and ``high`` are ``None`` and ``low``
    is the bound (``None`` too when no measured cell lies below it).
    """

    batch_size: float
    seconds: float
    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    confidence: float
    reach: float
    beyond: Optional[str] = None

    def holds(self, measured: float) -> bool:
        """Whether a measured value agrees with this prediction (inside the interval, or above the bound)."""
        if self.beyond is not None:
            return self.low is None or measured >= self.low
        return self.low <= measured <= self.high


@dataclass(frozen=True)
class CostModel:
    """A fitted cost model (see the module docstring); build it with :func:`fit_cost_model`."""

    terms: Tuple[str, ...]
    coefficients: Tuple[float, ...]
    dropped_terms: Tuple[str, ...]
    fit: LinearFit
    n_cells: int

    @property
    def sigma_rel(self) -> float:
        """Relative standard deviation of the cells around the model."""
        return self.fit.sigma

    def value(self, batch_size: float, seconds: float) -> float:
        """The fitted cost of a cell."""
        return self.fit.value([TERMS[t](batch_size, seconds) for t in self.terms])

    def coefficient(self, term: str) -> float:
        """A term's fitted coefficient, 0 for a term not in the model (dropped, or never asked for)."""
        return self.coefficients[self.terms.index(term)] if term in self.terms else 0.0

    def formula(self) -> str:
        """The fitted model as text, e.g. ``0.05 + 0.01*B*L + 0.0005*B*L^2``."""
        return " + ".join(f"{c:.3g}" if t == "1" else f"{c:.3g}*{t}" for t, c in zip(self.terms, self.coefficients))


def fit_cost_model(cells: Sequence[CostPoint], terms: Sequence[str] = DEFAULT_TERMS) -> CostModel:
    """Fit ``cost = sum_k coef_k * term_k(B, L)`` to measured cells.

    Arguments
    ---------
    cells : sequence of CostPoint
        Measured cells of one setting (one device and thread count).
    terms : sequence of str
        Names from :data:`TERMS`.

    Returns
    -------
    CostModel

    Raises
    ------
    ConfigError
        Too few cells for an interval (at least one more than the terms), or
        cells that cannot tell the terms apart (e.g. a single length, where
        B*L and B*L^2 are proportional).

    Example
    -------
    >>> truth = lambda b, s: 0.05 + 0.01 * b * s + 0.0005 * b * s * s
    >>> cells = [CostPoint(b, s, truth(b, s)) for b in (1, 4) for s in (1, 2, 5)]
    >>> model = fit_cost_model(cells)
    >>> [round(c, 9) for c in model.coefficients]
    [0.05, 0.01, 0.0005]
    >>> round(model.value(8, 32), 9) == round(truth(8, 32), 9)
    True
    """
    unknown = [t for t in terms if t not in TERMS]
    if unknown or not terms:
        raise ConfigError(f"unknown cost-model terms {unknown or list(terms)}; choose from {', '.join(TERMS)}")
    values = [c.value for c in cells]
    if not all(np.isfinite(v) and v > 0 for v in values):
        raise ConfigError("cost-model cells need positive, finite values")
    active = list(terms)
    if len(cells) < len(active) + 1:
        raise ConfigError(f"{len(cells)} measured cells are too few for a cost model with {len(active)} terms "
                          f"({', '.join(active)}): a prediction interval needs at least {len(active) + 1}")
    y = np.asarray(values, dtype=float)
    while True:
        design = [[TERMS[t](c.batch_size, c.seconds) for t in active] for c in cells]
        fit = fit_linear(design, y, weights=1.0 / y ** 2, names=active)
        worst = int(np.argmin(fit.coefficients))
        if fit.coefficients[worst] >= 0:
            break
        if len(active) == 1:
            raise ConfigError(f"the only remaining term {active[0]} came out negative: "
                              "the cells do not follow the model")
        del active[worst]
    return CostModel(terms=tuple(active), coefficients=fit.coefficients,
                     dropped_terms=tuple(t for t in terms if t not in active), fit=fit, n_cells=len(cells))


def size(cell: CostPoint) -> float:
    """Seconds of audio in the batch, B*L: how far out a cell lies."""
    return cell.batch_size * cell.seconds


def reach(ratio: float) -> float:
    """The error scale's multiplier for a cell ``ratio`` times further (in B*L) than the cells it is predicted
    from: 1 inside their range, one more per doubling beyond."""
    return 1.0 + math.log2(max(ratio, 1.0))


@dataclass(frozen=True)
class HeldOutError:
    """One measured cell predicted without itself: ``ratio`` its reach's argument, ``log_error``
    ``log(measured / predicted)``."""

    cell: CostPoint
    ratio: float
    log_error: float


def _check(fit_on: Sequence[CostPoint], cell: CostPoint, terms: Sequence[str]) -> Optional[HeldOutError]:
    try:
        predicted = fit_cost_model(fit_on, terms).value(cell.batch_size, cell.seconds)
    except ConfigError:  # too few cells left, or cells that cannot separate the terms
        return None
    if predicted <= 0:
        return None
    return HeldOutError(cell, size(cell) / max(size(c) for c in fit_on), math.log(cell.value / predicted))


def held_out_errors(cells: Sequence[CostPoint], terms: Sequence[str] = DEFAULT_TERMS) -> List[HeldOutError]:
    """Every cell predicted by the model fitted without it, and by the one fitted on the cells smaller than it
    (see the module docstring); checks that cannot be fitted are left out.

    Example
    -------
    >>> truth = lambda b, s: 0.1 + 0.02 * b * s
    >>> cells = [CostPoint(b, s, truth(b, s)) for b in (1, 2, 4) for s in (1, 2, 4)]
    >>> errors = held_out_errors(cells, ("1", "B*L"))
    >>> len(errors), max(abs(e.log_error) for e in errors) < 1e-9, max(e.ratio for e in errors)
    (14, True, 2.0)
    """
    out = []
    for i, cell in enumerate(cells):
        rest = list(cells[:i]) + list(cells[i + 1:])
        checks = [rest]
        smaller = [c for c in rest if size(c) < size(cell)]
        if len(smaller) < len(rest):  # the same fit as leaving it out, otherwise
            checks.append(smaller)
        out += [e for e in (_check(fit_on, cell, terms) for fit_on in checks if fit_on) if e is not None]
    return out


@dataclass(frozen=True)
class Calibration:
    """The spread of held-out errors, per unit of reach: ``scale`` over ``count`` checks reaching up to
    ``max_ratio``."""

    scale: float
    count: int
    max_ratio: float

    def half_width(self, ratio: float, confidence: float) -> float:
        """Half-width, in log space, of the interval at ``ratio``."""
        return t_quantile(confidence, self.count - 1) * self.scale * math.sqrt(1 + 1 / self.count) * reach(ratio)

    def supports(self, ratio: float) -> bool:
        """Whether the checks reach far enough to vouch for a prediction at ``ratio``."""
        return ratio <= SUPPORT * max(self.max_ratio, 1.0)


def calibrate(cells: Sequence[CostPoint], terms: Sequence[str] = DEFAULT_TERMS) -> Optional[Calibration]:
    """The :class:`Calibration` of ``cells``' held-out errors, ``None`` with fewer than :data:`MIN_HELD_OUT`."""
    errors = held_out_errors(cells, terms)
    if len(errors) < MIN_HELD_OUT:
        return None
    scaled = [e.log_error / reach(e.ratio) for e in errors]
    return Calibration(scale=math.sqrt(sum(x * x for x in scaled) / len(scaled)), count=len(errors),
                       max_ratio=max(e.ratio for e in errors))


def lower_bound(cells: Sequence[CostPoint], batch_size: float, seconds: float) -> Optional[float]:
    """The largest measured cost among cells with no more utterances and no longer ones (cost never falls as
    either grows), ``None`` when none is measured."""
    below = [c.value for c in cells if c.batch_size <= batch_size and c.seconds <= seconds]
    return max(below) if below else None


def predict(cells: Sequence[CostPoint], targets: Sequence[Tuple[float, float]], terms: Sequence[str] = DEFAULT_TERMS,
            confidence: float = 0.95, beyond: Optional[Dict[Tuple[float, float], str]] = None
            ) -> Tuple[CostModel, List[Prediction]]:
    """The fitted model, and per target ``(batch_size, seconds)`` a calibrated prediction or a lower bound.

    ``beyond`` gives targets that must be bounds, with why (e.g. a cache
    regime no measured cell reached). Raises :class:`ConfigError` when no
    model can be fitted.

    Example
    -------
    >>> truth = lambda b, s: 0.1 + 0.02 * b * s
    >>> cells = [CostPoint(b, s, truth(b, s)) for b in (1, 2, 4) for s in (1, 2, 4)]
    >>> _, (near, far) = predict(cells, [(4, 8), (16, 32)], ("1", "B*L"))
    >>> round(near.value, 6), near.beyond is None, far.value, round(far.low, 6), far.beyond[:30]
    (0.74, True, None, 0.42, 'extrapolated 32x beyond the la')
    """
    model = fit_cost_model(cells, terms)
    calibration = calibrate(cells, terms)
    largest = max(size(c) for c in cells)
    out = []
    for batch_size, seconds in targets:
        ratio = batch_size * seconds / largest
        why = (beyond or {}).get((batch_size, seconds))
        if why is None and calibration is None:
            why = (f"too few measured cells to check predictions on held-out cells (fewer than {MIN_HELD_OUT} "
                   "checks)")
        elif why is None and not calibration.supports(ratio):
            why = (f"extrapolated {ratio:.3g}x beyond the largest measured B*L, more than {SUPPORT:g}x the "
                   f"furthest held-out check ({calibration.max_ratio:.3g}x)")
        if why is not None:
            out.append(Prediction(batch_size, seconds, None, lower_bound(cells, batch_size, seconds), None,
                                  confidence, reach(ratio), why))
            continue
        mu = model.value(batch_size, seconds)
        half = calibration.half_width(ratio, confidence)
        out.append(Prediction(batch_size, seconds, mu, mu * math.exp(-half), mu * math.exp(half), confidence,
                              reach(ratio)))
    return model, out


@dataclass(frozen=True)
class HeldOutCell:
    """A held-out cell: measured and predicted, ``rel_error = predicted / measured - 1`` (``None`` for a bound)."""

    prediction: Prediction
    measured: float
    rel_error: Optional[float]
    inside: bool


@dataclass(frozen=True)
class HeldOutReport:
    """Held-out validation: the model fitted on some cells, errors on the others."""

    model: CostModel
    cells: List[HeldOutCell]

    @property
    def median_abs_rel_error(self) -> Optional[float]:
        """Over the cells given a number (bounds have none)."""
        errors = [abs(c.rel_error) for c in self.cells if c.rel_error is not None]
        return float(np.median(errors)) if errors else None


def validate_held_out(
    fit_on: Sequence[CostPoint],
    held_out: Sequence[CostPoint],
    terms: Sequence[str] = DEFAULT_TERMS,
    confidence: float = 0.95,
    beyond: Optional[Dict[Tuple[float, float], str]] = None,
) -> HeldOutReport:
    """Fit on ``fit_on`` (e.g. the triangle) and predict ``held_out`` (e.g. the corner), as :func:`predict` would.

    Example
    -------
    >>> truth = lambda b, s: 0.1 + 0.02 * b * s
    >>> grid = [CostPoint(b, s, truth(b, s)) for b in (1, 4, 8) for s in (1, 2, 5)]
    >>> report = validate_held_out(grid[:6], grid[6:], terms=("1", "B*L"))
    >>> report.median_abs_rel_error < 1e-9
    True
    """
    if not held_out:
        raise ConfigError("held-out validation needs at least one held-out cell")
    model, predictions = predict(fit_on, [(c.batch_size, c.seconds) for c in held_out], terms, confidence, beyond)
    return HeldOutReport(model=model, cells=[
        HeldOutCell(prediction=p, measured=c.value, rel_error=None if p.value is None else p.value / c.value - 1,
                    inside=p.holds(c.value))
        for p, c in zip(predictions, held_out)])
