"""A synthetic LibriSpeech train-clean-100-like distribution of (T, U) shapes.

Fitted from summary figures only (no data shipped) of LibriSpeech
train-clean-100 with 3-way speed perturbation (85,617 utterances; T = frames
after 4x subsampling, 40 ms per frame; U = tokens of a 500-piece BPE model),
as recorded in the project's shared notes:

- T: min 31, 5 % 105, 25 % 284, median 343, 75 % 382, 95 % 432, max 680 (mean 318.3);
- U: min 2, 5 % 22, 25 % 57, median 71, 75 % 83, 95 % 98, max 151 (mean 67.8);
- Pearson correlation of T and U: 0.824 (computed once from the same shape file).

Model: a Gaussian copula. T and U follow the piecewise-linear quantile
functions through their quantiles (so both marginals match by
construction); their normal scores are correlated with coefficient
:data:`COPULA_RHO`, fitted by :func:`fit_copula_rho` so that the Pearson
correlation of (T, U) is the recorded one. U grows with T as in speech,
with the spread of speaking rates the real file shows. (A rate model
``U = T x r`` with ``r`` independent of T, fitted to U's quantiles alone,
gave a correlation of 0.96: speed perturbation makes short copies of an
utterance speak faster, which quantiles cannot reveal.)
"""
from __future__ import annotations

import bisect
import math
import random
from typing import List, Sequence, Tuple

PROBS = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
T_QUANTILES = (31, 105, 284, 343, 382, 432, 680)
U_QUANTILES = (2, 22, 57, 71, 83, 98, 151)
T_MEAN, U_MEAN = 318.3, 67.8

T_U_CORRELATION = 0.824
COPULA_RHO = 0.8486
"""Correlation of the normal scores of T and U, fitted by :func:`fit_copula_rho`."""


def quantile_function(p: float, probs: Sequence[float] = PROBS, values: Sequence[float] = T_QUANTILES) -> float:
    """Piecewise-linear interpolation of ``values`` at probability ``p``.

    Example
    -------
    >>> quantile_function(0.5), quantile_function(0.375)
    (343.0, 313.5)
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    i = min(bisect.bisect_right(probs, p), len(probs) - 1)
    p0, p1, v0, v1 = probs[i - 1], probs[i], values[i - 1], values[i]
    return float(v0 + (v1 - v0) * (p - p0) / (p1 - p0))


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def sample_shapes(n: int, seed: int = 0, rho: float = COPULA_RHO) -> List[Tuple[int, int]]:
    """``n`` synthetic ``(T, U)`` pairs (see the module docstring); ``T, U >= 1``.

    Example
    -------
    >>> shapes = sample_shapes(2000, seed=1)
    >>> ts = sorted(t for t, _ in shapes)
    >>> 320 < ts[1000] < 366 and all(u >= 1 for _, u in shapes)
    True
    """
    rng = random.Random(seed)
    spread = math.sqrt(max(0.0, 1.0 - rho * rho))
    shapes = []
    for _ in range(n):
        z_t = rng.gauss(0.0, 1.0)
        z_u = rho * z_t + spread * rng.gauss(0.0, 1.0)
        t = max(1, round(quantile_function(_normal_cdf(z_t), PROBS, T_QUANTILES)))
        u = max(1, round(quantile_function(_normal_cdf(z_u), PROBS, U_QUANTILES)))
        shapes.append((t, u))
    return shapes


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy)


def fit_copula_rho(target: float = T_U_CORRELATION, samples: int = 20000, seed: int = 0) -> float:
    """The copula coefficient whose samples have Pearson correlation ``target``.

    Bisection on ``rho`` in [0, 1] (the correlation grows with it); the same
    seed for every trial makes the objective monotone and the fit reproducible.

    Example
    -------
    >>> rho = fit_copula_rho(0.5, samples=3000)
    >>> 0.4 < rho < 0.7
    True
    """
    lo, hi = 0.0, 1.0
    for _ in range(20):
        mid = (lo + hi) / 2
        shapes = sample_shapes(samples, seed, rho=mid)
        if _pearson([t for t, _ in shapes], [u for _, u in shapes]) < target:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 4)
