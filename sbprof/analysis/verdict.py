"""A noise-aware verdict for a regression gate: improved, unchanged or regressed.

Between fresh processes a cell's median varies by ~10% (CV) on these
machines, while one run's batches vary by ~+-3%; a test on pooled batch
samples mistakes that process-to-process noise for a change and flags
identical code. So the unit of evidence here is the *run*: each side's
samples are grouped by fresh process and reduced to one figure per run
(its median by default; see below).

The ratio candidate / baseline is the Hodges-Lehmann estimate on the log
scale, i.e. the median of all ``m * n`` ratios of a candidate run median to a
baseline run median (geometric mean of the middle two when ``m * n`` is
even), and its interval is the exact distribution-free one
that inverts the two-sided Mann-Whitney rank test (valid for any continuous
run-to-run distribution under a multiplicative shift; no seed, no bootstrap).
It needs at least 4 runs per side for 95%.

Decision, with ``worse`` the ratio turned so that above 1 is worse:

- ``regressed``: the interval lies wholly on the worse side of 1 *and* the
  estimate is worse than ``1 + threshold``;
- ``improved``: the mirror image (better than ``1 / (1 + threshold)``);
- ``unchanged``: otherwise (no change beyond the threshold that the runs can
  show; ``reason`` says which).

So identical code is called regressed with probability at most
``(1 - confidence) / 2`` (2.5% at 95%).

Each run is reduced to one figure, its median by default. On a shared
machine a run's calls are slowed by episodes of contention from other
tenants (seen here: within one process, stretches of 1-5 s at 1.4x the
quiet speed), which move whole run medians; a low percentile of a run's
calls (``statistic="p10"``) keeps the calls made outside such episodes
and so varies far less between runs, when a run is long enough to
outlast an episode (about 100 calls or more). The test is the same
whichever figure is used, so the false-alarm bound holds for each.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from numbers import Real
from typing import Callable, List, Sequence, Tuple, Union

import numpy as np

from sbprof.base.errors import ConfigError
from sbprof.record.codec import Codec
from sbprof.base.stats import quantile

STATISTICS = "median, min, or pNN (the NN-th percentile of a run's samples, e.g. p10)"


def verdict_method(statistic: str = "median") -> str:
    """How a verdict is reached, in words (``statistic``: the per-run figure)."""
    return (f"Hodges-Lehmann ratio of run {statistic}s with the exact Mann-Whitney interval "
            "(runs = fresh processes)")


def run_statistic(name: str) -> Callable[[Sequence[float]], float]:
    """The figure each run is reduced to: ``median``, ``min`` or ``pNN`` (NN-th percentile, 0 < NN < 100).

    Example
    -------
    >>> run_statistic("p10")([5.0, 1.0, 2.0, 3.0, 4.0]), run_statistic("min")([3.0, 2.0])
    (1.4, 2.0)
    >>> run_statistic("p0")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: statistic 'p0' is not one of median, min, or pNN (the NN-th percentile of a run's samples, e.g. p10)
    """
    if name == "median":
        return statistics.median
    if name == "min":
        return min
    try:
        q = float(name[1:]) / 100 if name.startswith("p") else math.nan
    except ValueError:
        q = math.nan
    if not 0 < q < 1:
        raise ConfigError(f"statistic {name!r} is not one of {STATISTICS}")
    return lambda run: quantile(run, q)

Runs = Union[Sequence[Sequence[float]], Sequence[float]]


@lru_cache(maxsize=256)
def mann_whitney_cdf(m: int, n: int) -> np.ndarray:
    """Null distribution of the Mann-Whitney count U for samples of sizes m and n.

    Returns ``P(U <= u)`` for ``u = 0 .. m*n``. The counts of U are the
    coefficients of the Gaussian binomial ``[m+n choose m]_q``, built as
    ``prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i)``, renormalised at each step so
    that large samples do not overflow. Cached; the array is read-only.

    Example
    -------
    >>> cdf = mann_whitney_cdf(2, 2)   # U = 0..4 with counts 1, 1, 2, 1, 1 out of 6
    >>> (cdf * 6).round(9).tolist()
    [1.0, 2.0, 4.0, 5.0, 6.0]
    """
    if m < 1 or n < 1:
        raise ConfigError(f"Mann-Whitney needs two non-empty samples, got sizes {m} and {n}")
    size = m * n + 1
    p = np.zeros(size)
    p[0] = 1.0
    for i in range(1, m + 1):
        shift = n + i
        if shift < size:
            p[shift:] -= p[:-shift].copy()
        # Dividing by (1 - q^i) is a running sum along each residue class modulo i.
        for r in range(min(i, size)):
            p[r::i] = np.cumsum(p[r::i])
        p /= p.sum()
    cdf = np.minimum(np.cumsum(p), 1.0)
    cdf.setflags(write=False)  # cached: shared by every caller
    return cdf


def _as_runs(samples: Runs, side: str) -> List[List[float]]:
    if len(samples) == 0:
        raise ConfigError(f"{side}: no samples")
    if isinstance(samples[0], Real):
        runs = [[float(x) for x in samples]]  # one flat list: one process
    else:
        runs = [[float(x) for x in run] for run in samples]
    if any(len(run) == 0 for run in runs):
        raise ConfigError(f"{side}: a run has no samples")
    if any(not (x > 0 and math.isfinite(x)) for run in runs for x in run):
        raise ConfigError(f"{side}: samples must be positive and finite (times, bytes, RTFs)")
    return runs


def _shift_interval(log_base: np.ndarray, log_cand: np.ndarray, confidence: float) -> Tuple[float, float, float, float]:
    """Hodges-Lehmann shift (candidate - baseline) with its exact interval and level."""
    m, n = len(log_base), len(log_cand)
    diffs = np.sort((log_cand[:, None] - log_base[None, :]).ravel())
    cdf = mann_whitney_cdf(m, n)
    alpha_half = (1 - confidence) / 2
    # Largest k with P(U <= k - 1) <= alpha/2 (the tolerance keeps exact ties, e.g. 1/40, in):
    # the interval is [D_(k), D_(mn - k + 1)].
    k = int(np.searchsorted(cdf, alpha_half + 1e-12, side="right"))
    if k == 0:
        # With r runs a side the most extreme ranking has probability 1 / C(2r, r).
        need = next(r for r in range(1, 64) if 2 / math.comb(2 * r, r) <= 1 - confidence)
        raise ConfigError(
            f"{m} baseline and {n} candidate runs cannot give a {100 * confidence:g}% interval "
            f"(at most {100 * (1 - 2 * cdf[0]):.1f}%); measure at least {need} fresh-process runs per side"
        )
    level = 1 - 2 * float(cdf[k - 1])
    return float(np.median(diffs)), float(diffs[k - 1]), float(diffs[m * n - k]), level


@dataclass(frozen=True)
class Verdict(Codec):
    """Outcome of :func:`compare_runs`.

    ``ratio``, ``low`` and ``high`` are candidate / baseline (above 1: the
    candidate's figure is larger); ``confidence`` is the interval's exact
    level (at least the requested one); ``baseline_median`` and
    ``candidate_median`` are the medians over runs of each run's ``statistic``.
    """

    verdict: str
    ratio: float
    low: float
    high: float
    confidence: float
    threshold: float
    lower_is_better: bool
    baseline_runs: int
    candidate_runs: int
    baseline_median: float
    candidate_median: float
    reason: str
    statistic: str = "median"
    method: str = verdict_method()


def compare_runs(
    baseline: Runs,
    candidate: Runs,
    threshold: float = 0.05,
    confidence: float = 0.95,
    lower_is_better: bool = True,
    statistic: str = "median",
) -> Verdict:
    """Compare a candidate against a baseline from their raw samples grouped by run.

    Arguments
    ---------
    baseline, candidate : list of lists of float
        Raw samples (batch times, RTFs, peak bytes), one inner list per
        fresh-process run. A flat list counts as a single run, which is too
        few: between-process noise cannot be seen from one process.
    threshold : float
        Smallest relative change that counts (0.05: 5% worse).
    confidence : float
        Level of the interval (two-sided).
    lower_is_better : bool
        True for times and memory; False for throughputs such as RTFx.
    statistic : str
        The figure each run is reduced to (:func:`run_statistic`): ``median``,
        ``min`` or ``pNN``.

    Returns
    -------
    Verdict

    Example
    -------
    >>> base = [[1.00], [1.10], [0.90], [1.05], [0.95], [1.02]]
    >>> slow = [[1.30 * x for x in run] for run in base]
    >>> v = compare_runs(base, slow)
    >>> v.verdict, round(v.ratio, 6)
    ('regressed', 1.3)
    >>> compare_runs(base, base).verdict
    'unchanged'
    """
    if not threshold >= 0:
        raise ConfigError(f"threshold must be >= 0, got {threshold}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    figure = run_statistic(statistic)
    base_figures = [figure(run) for run in _as_runs(baseline, "baseline")]
    cand_figures = [figure(run) for run in _as_runs(candidate, "candidate")]
    shift, lo, hi, level = _shift_interval(np.log(base_figures), np.log(cand_figures), confidence)
    ratio, low, high = math.exp(shift), math.exp(lo), math.exp(hi)
    # Turn the ratio so that above 1 means worse, whichever direction is better.
    worse, worse_lo, worse_hi = (ratio, low, high) if lower_is_better else (1 / ratio, 1 / high, 1 / low)
    limit = 1 + threshold
    change = f"{100 * (worse - 1):.1f}% worse" if worse >= 1 else f"{100 * (1 - worse):.1f}% better"
    span, beyond = f"[{low:.3f}, {high:.3f}]", f"the {100 * threshold:g}% threshold"
    if worse_lo > 1 and worse > limit:
        verdict, reason = "regressed", f"{change}, interval {span} excludes 1, beyond {beyond}"
    elif worse_hi < 1 and worse < 1 / limit:
        verdict, reason = "improved", f"{change}, interval {span} excludes 1, beyond {beyond}"
    elif worse_lo > 1 or worse_hi < 1:
        verdict, reason = "unchanged", f"{change}: a real change but within {beyond}"
    else:
        verdict, reason = "unchanged", f"{change}: interval {span} includes 1, no change the runs can show"
    return Verdict(
        verdict=verdict, ratio=ratio, low=low, high=high, confidence=level, threshold=threshold,
        lower_is_better=lower_is_better, baseline_runs=len(base_figures), candidate_runs=len(cand_figures),
        baseline_median=statistics.median(base_figures), candidate_median=statistics.median(cand_figures),
        reason=reason, statistic=statistic, method=verdict_method(statistic),
    )
