"""Weighted linear least squares with coefficient and prediction intervals.

Shared by the growth laws and the cost model. Measured costs span orders of
magnitude, so both fit in *relative* error: with weights ``1 / y**2`` the
weighted residuals are ``(y - fit) / y`` and the residual scale ``sigma`` is a
relative standard deviation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
from scipy.special import stdtrit

from sbprof.base.errors import ConfigError


def t_quantile(confidence: float, dof: int) -> float:
    """Two-sided Student-t critical value: P(|T| <= value) = ``confidence``.

    Example
    -------
    >>> round(t_quantile(0.95, 10), 3)
    2.228
    """
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    if dof < 1:
        raise ConfigError(f"an interval needs at least one degree of freedom, got {dof}")
    return float(stdtrit(dof, 0.5 + confidence / 2))


@dataclass(frozen=True)
class LinearFit:
    """Result of :func:`fit_linear`: ``y ~ X @ coefficients``.

    ``unscaled_cov`` is ``(X^T W X)^-1``; the coefficients' covariance is
    ``sigma**2 * unscaled_cov``. ``sigma`` is the weighted residual standard
    deviation (NaN when ``dof`` is 0, i.e. as many rows as columns).
    """

    coefficients: Tuple[float, ...]
    unscaled_cov: Tuple[Tuple[float, ...], ...]
    sigma: float
    dof: int

    def value(self, x: Sequence[float]) -> float:
        """Fitted mean at one design row ``x``."""
        return float(np.dot(self.coefficients, x))

    def value_se(self, x: Sequence[float]) -> float:
        """Standard error of the fitted mean at ``x`` (weighted units)."""
        xv = np.asarray(x, dtype=float)
        return float(self.sigma * math.sqrt(max(xv @ np.asarray(self.unscaled_cov) @ xv, 0.0)))

    def coefficient_interval(self, index: int, confidence: float = 0.95) -> Tuple[float, float]:
        """Student-t interval of one coefficient (normal residuals assumed)."""
        half = t_quantile(confidence, self.dof) * self.sigma * math.sqrt(self.unscaled_cov[index][index])
        return self.coefficients[index] - half, self.coefficients[index] + half


def fit_linear(
    design: Sequence[Sequence[float]],
    y: Sequence[float],
    weights: Optional[Sequence[float]] = None,
    names: Optional[Sequence[str]] = None,
) -> LinearFit:
    """Weighted least squares fit of ``y`` on the columns of ``design``.

    Arguments
    ---------
    design : rows of floats
        One row per observation, one column per term.
    y : sequence of float
        Observations.
    weights : sequence of float, optional
        Inverse variances (up to a common factor); ``None`` for equal weights.
    names : sequence of str, optional
        Term names, used only in error messages.

    Returns
    -------
    LinearFit

    Raises
    ------
    ConfigError
        Fewer observations than terms, or terms the data cannot tell apart
        (rank-deficient design), or non-finite values.

    Example
    -------
    >>> fit = fit_linear([[1, 0], [1, 1], [1, 2]], [1.0, 3.0, 5.0])
    >>> [round(c, 9) for c in fit.coefficients]
    [1.0, 2.0]
    """
    X = np.asarray(design, dtype=float)
    yv = np.asarray(y, dtype=float)
    if X.ndim != 2 or X.shape[0] != yv.shape[0]:
        raise ConfigError(f"design has shape {X.shape} but there are {yv.shape[0]} observations")
    rows, cols = X.shape
    labels = list(names) if names is not None else [f"column {j}" for j in range(cols)]
    if rows < cols:
        raise ConfigError(f"{rows} observations cannot determine {cols} terms ({', '.join(labels)})")
    w = np.ones(rows) if weights is None else np.asarray(weights, dtype=float)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(yv)) and np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ConfigError("least squares needs finite values and positive weights")
    sw = np.sqrt(w)
    Xw, yw = X * sw[:, None], yv * sw
    # Column scaling keeps the rank test meaningful when terms differ by orders of magnitude.
    scale = np.linalg.norm(Xw, axis=0)
    scale[scale == 0] = 1.0
    rank = np.linalg.matrix_rank(Xw / scale)
    if rank < cols:
        raise ConfigError(
            f"the observations cannot tell the terms apart ({', '.join(labels)}: rank {rank} < {cols});"
            " measure more distinct points"
        )
    coef, *_ = np.linalg.lstsq(Xw, yw, rcond=None)
    resid = yw - Xw @ coef
    dof = rows - cols
    sigma = math.sqrt(float(resid @ resid) / dof) if dof > 0 else math.nan
    cov = np.linalg.inv(Xw.T @ Xw)
    return LinearFit(
        coefficients=tuple(float(c) for c in coef),
        unscaled_cov=tuple(tuple(float(v) for v in row) for row in cov),
        sigma=sigma,
        dof=dof,
    )
