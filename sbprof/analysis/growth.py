"""Growth laws: how a cost grows with input size n, and where two variants cross.

Forms, each with a reason to be on the list:

- ``power``: ``t = a * n**b``, fitted by least squares on log t against
  log n; ``b`` is the headline figure (1: linear, 2: quadratic) and comes
  with a Student-t interval.
- ``linear``: ``t = a + b*n``: a fixed overhead plus per-frame work
  (convolutions, feed-forward layers, RNNs). A power law fitted to this bends
  (b < 1 at small n), so it is offered as such.
- ``quadratic``: ``t = a + b*n + c*n**2``: the same plus self-attention's
  score matrix, whose cost grows with the square of the length.

The two polynomial forms are fitted in relative error (weights 1/t^2), as
the log fit effectively is, since points span orders of magnitude.
The chosen form is the one with the lowest leave-one-out error: each point
is predicted by the form fitted without it, and the root mean square of the
relative prediction errors is compared (ties go to fewer coefficients).
That penalises a form that merely bends to fit noise, on the scale a reader
cares about, without assuming how the forms' likelihoods compare.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sbprof.analysis.lsq import fit_linear
from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec

FORMS: Tuple[str, ...] = ("power", "linear", "quadratic")
_N_COEFFICIENTS = {"power": 2, "linear": 2, "quadratic": 3}


@dataclass(frozen=True)
class GrowthFit(Codec):
    """One fitted growth form.

    ``coefficients`` are ``(a, b)`` for power and linear, ``(a, b, c)`` for
    quadratic. ``exponent_interval`` is the interval of ``b`` for the power
    form (``None`` otherwise, or with fewer than 3 points). ``loo_rel_error``
    is the leave-one-out RMS relative error (NaN when too few points).
    """

    form: str
    coefficients: Tuple[float, ...]
    exponent_interval: Optional[Tuple[float, float]]
    confidence: float
    rel_rmse: float
    loo_rel_error: float
    n_points: int
    n_min: float
    n_max: float

    def predict(self, n: float) -> float:
        """The fitted cost at size ``n``."""
        return _evaluate(self.form, self.coefficients, n)

    def formula(self) -> str:
        """The fitted law as text, e.g. ``t = 1.2e-03 * n^1.98``."""
        c = self.coefficients
        if self.form == "power":
            return f"t = {c[0]:.3g} * n^{c[1]:.3g}"
        if self.form == "linear":
            return f"t = {c[0]:.3g} + {c[1]:.3g}*n"
        return f"t = {c[0]:.3g} + {c[1]:.3g}*n + {c[2]:.3g}*n^2"


def _evaluate(form: str, c: Sequence[float], n: float) -> float:
    if form == "power":
        return c[0] * n ** c[1]
    if form == "linear":
        return c[0] + c[1] * n
    return c[0] + c[1] * n + c[2] * n * n


def _checked_points(n: Sequence[float], t: Sequence[float]) -> Tuple[np.ndarray, np.ndarray]:
    nv, tv = np.asarray(n, dtype=float), np.asarray(t, dtype=float)
    if nv.shape != tv.shape or nv.ndim != 1:
        raise ConfigError(f"sizes and costs must be two lists of equal length, got {nv.shape} and {tv.shape}")
    if not (np.all(np.isfinite(nv)) and np.all(np.isfinite(tv)) and np.all(nv > 0) and np.all(tv > 0)):
        raise ConfigError("growth fits need positive, finite sizes and costs")
    return nv, tv


def _fit_coefficients(form: str, nv: np.ndarray, tv: np.ndarray):
    if form == "power":
        fit = fit_linear(np.column_stack([np.ones_like(nv), np.log(nv)]), np.log(tv), names=["log a", "b"])
        return (math.exp(fit.coefficients[0]), fit.coefficients[1]), fit
    columns = [np.ones_like(nv), nv] + ([nv * nv] if form == "quadratic" else [])
    names = ["a", "b*n", "c*n^2"][: len(columns)]
    fit = fit_linear(np.column_stack(columns), tv, weights=1.0 / tv ** 2, names=names)
    return fit.coefficients, fit


def fit_growth_form(form: str, n: Sequence[float], t: Sequence[float], confidence: float = 0.95) -> GrowthFit:
    """Fit one growth form to (size, cost) points.

    Arguments
    ---------
    form : str
        One of :data:`FORMS`.
    n, t : sequences of float
        Sizes (e.g. seconds of audio) and costs (e.g. median seconds); a size
        may repeat (several runs).
    confidence : float
        Level of the exponent's interval (power form).

    Returns
    -------
    GrowthFit

    Example
    -------
    >>> fit = fit_growth_form("power", [1, 2, 4, 8], [3.0, 12.0, 48.0, 192.0])
    >>> round(fit.coefficients[0], 9), round(fit.coefficients[1], 9), fit.formula()
    (3.0, 2.0, 't = 3 * n^2')
    """
    if form not in FORMS:
        raise ConfigError(f"unknown growth form {form!r}; choose from {', '.join(FORMS)}")
    nv, tv = _checked_points(n, t)
    if len(np.unique(nv)) < _N_COEFFICIENTS[form]:
        raise ConfigError(f"the {form} form needs at least {_N_COEFFICIENTS[form]} distinct sizes, "
                          f"got {len(np.unique(nv))}")
    coefficients, fit = _fit_coefficients(form, nv, tv)
    interval = fit.coefficient_interval(1, confidence) if form == "power" and fit.dof >= 1 else None
    rel = np.array([_evaluate(form, coefficients, x) for x in nv]) / tv - 1
    loo: List[float] = []
    for i in range(len(nv)):
        keep = np.arange(len(nv)) != i
        if len(np.unique(nv[keep])) < _N_COEFFICIENTS[form]:
            loo = []
            break
        loo.append(_evaluate(form, _fit_coefficients(form, nv[keep], tv[keep])[0], nv[i]) / tv[i] - 1)
    return GrowthFit(
        form=form, coefficients=tuple(coefficients), exponent_interval=interval, confidence=confidence,
        rel_rmse=float(np.sqrt(np.mean(rel ** 2))),
        loo_rel_error=float(np.sqrt(np.mean(np.square(loo)))) if loo else math.nan,
        n_points=len(nv), n_min=float(nv.min()), n_max=float(nv.max()),
    )


@dataclass(frozen=True)
class GrowthChoice:
    """Every form fitted, and the one chosen by leave-one-out error."""

    best: GrowthFit
    fits: Dict[str, GrowthFit]
    criterion: str = "lowest leave-one-out RMS relative error (ties: fewer coefficients)"


def choose_growth_law(
    n: Sequence[float], t: Sequence[float], forms: Sequence[str] = FORMS, confidence: float = 0.95
) -> GrowthChoice:
    """Fit each form in ``forms`` and choose one (see the module docstring).

    Forms the points cannot support (too few distinct sizes for a
    leave-one-out fit) are fitted when possible but not eligible.

    Example
    -------
    >>> sizes = [1, 2, 4, 8, 16, 32]
    >>> choice = choose_growth_law(sizes, [0.5 + 0.01 * x for x in sizes])
    >>> choice.best.form
    'linear'
    """
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        raise ConfigError(f"unknown growth form(s) {unknown}; choose from {', '.join(FORMS)}")
    _checked_points(n, t)
    fits: Dict[str, GrowthFit] = {}
    for form in forms:
        try:
            fits[form] = fit_growth_form(form, n, t, confidence)
        except ConfigError:
            continue  # too few distinct sizes for this form: not a candidate
    eligible = [f for f in fits.values() if not math.isnan(f.loo_rel_error)]
    if not eligible:
        raise ConfigError(f"no growth form can be judged from {len(n)} points: "
                          "leave-one-out needs at least 3 distinct sizes (4 for quadratic)")
    best = min(eligible, key=lambda f: (f.loo_rel_error, len(f.coefficients)))
    return GrowthChoice(best=best, fits=fits)


def _bisect(f: Callable[[float], float], lo: float, hi: float) -> float:
    """A root of ``f`` between ``lo`` and ``hi``, where ``f`` changes sign."""
    f_lo = f(lo)
    while True:
        mid = (lo + hi) / 2
        if mid in (lo, hi):  # adjacent floats: as close as the arithmetic allows
            return mid
        f_mid = f(mid)
        if f_mid == 0:
            return mid
        if (f_mid < 0) == (f_lo < 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid


def crossovers(first: GrowthFit, second: GrowthFit, n_min: float, n_max: float, grid: int = 512) -> List[float]:
    """Sizes in ``[n_min, n_max]`` where the two fitted curves cross.

    The difference of the curves is scanned on a logarithmic grid and each
    sign change refined by bisection to machine precision; crossings closer
    together than the grid spacing can be missed.

    Example
    -------
    >>> quad = fit_growth_form("power", [1, 10, 100], [1e-3, 1e-1, 10.0])  # 1e-3 n^2
    >>> lin = fit_growth_form("power", [1, 10, 100], [0.1, 1.0, 10.0])     # 0.1 n
    >>> [round(x, 6) for x in crossovers(quad, lin, 1, 1000)]
    [100.0]
    """
    if not 0 < n_min < n_max:
        raise ConfigError(f"need 0 < n_min < n_max, got {n_min} and {n_max}")

    def diff(x: float) -> float:
        return first.predict(x) - second.predict(x)

    xs = np.geomspace(n_min, n_max, grid)
    ds = np.array([diff(x) for x in xs])
    found: List[float] = []
    for i in range(grid - 1):
        if ds[i] == 0:
            found.append(float(xs[i]))
        elif ds[i] * ds[i + 1] < 0:
            found.append(_bisect(diff, float(xs[i]), float(xs[i + 1])))
    if ds[-1] == 0:
        found.append(float(xs[-1]))
    return found
