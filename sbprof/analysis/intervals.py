"""The typical figure of a cell over fresh-process runs, with an interval one outlying run cannot blow up.

On a shared machine most fresh-process runs of a cell agree within a few
per cent, and now and then one run lands far off (another process woke up,
the first cell of a process paid for a warm-up): 1.13-1.33x or 0.84-0.89x of
its cell's median in the runs behind issue 21. An interval built from the
standard deviation of four runs, one of them such an outlier, was +-20 %
where the other runs alone gave +-5 %.

Two intervals, both for the *typical* run figure of this machine (the
median a large number of runs would give), not for one more run:

- :func:`typical_interval` (what reports print and adaptive repeats
  target): the median of the run medians, ``median * exp(+-t(m-1) *
  sqrt(pi / 2) * s / sqrt(m))``, where ``s`` is the standard deviation of
  the logarithms of the ``m`` runs kept: from 5 runs on, a run more than
  4.5 MADs (scaled median absolute deviations of the logarithms) from the
  median is an outlier, named and left out of ``s``. ``sqrt(pi / 2)`` is the
  sample median's efficiency, Student's ``t`` pays for estimating ``s``.
  Simulated on log-normal runs (``tests/analysis``): 95 % intervals cover
  the true median in 92-97 % of trials at 4-8 runs, with one run in ``n``
  moved by 1.3x or 0.85x as well; at a 3 % spread between runs the median
  half-width is about 6 % at 4 runs.

  Given a :class:`SpreadPrior`, the spread between runs of the other cells
  measured in the same setting (the same worker processes, the same
  machine), ``s`` is moderated toward it: ``s**2 = (d0 * s0**2 + d *
  s**2) / (d0 + d)`` with ``d0`` = :data:`PRIOR_DF` and ``t`` on ``d0 + d``
  degrees of freedom (an empirical-Bayes t, as in Smyth 2004). Four runs
  pin a spread poorly: adaptive repeats stop the cells whose four runs
  happened to agree, and their own spread then claims too much (the four
  default sweeps behind issue 21 held 75 % of cells on their own spread,
  90 % moderated, at about the same median width).
- :func:`interval_over_runs` (kept in results.json, no assumption about the
  runs' distribution): the interpolated order-statistics interval for the
  median (Hettmansperger & Sheather, 1986). The sign-test interval
  ``[x_(d), x_(n-d+1)]`` has exact coverage ``1 - 2 P(Binomial(n, 1/2) < d)``
  for any continuous distribution; interpolating between neighbouring order
  statistics brings it to the requested level. Below 6 runs no pair reaches
  95 %: it is then ``[min, max]`` with its exact (lower) level.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable, List, Optional, Sequence, Tuple

from sbprof.base.errors import ConfigError
from sbprof.base.stats import summarise
from sbprof.record.codec import Codec, to_json

INTERVAL_METHOD = "distribution-free interval for the median of run medians (interpolated order statistics)"
TYPICAL_METHOD = ("interval for the typical run median: median of run medians, Student t on the logarithms of the "
                  "runs kept (from 5 runs, a run beyond 4.5 MADs is an outlier, left out)")
MODERATED = "; their spread moderated toward the setting's pooled spread"
OUTLIER_MADS = 4.5
"""A run whose log distance from the median exceeds this many scaled MADs is an outlier."""
OUTLIER_MIN_RUNS = 5
"""Fewer runs than this give no robust scale: no run is called an outlier."""
MAD_SCALE = 1.4826
"""Scales a median absolute deviation to a normal standard deviation."""
PRIOR_DF = 4
"""Degrees of freedom a setting's pooled spread counts for beside a cell's own (about one more cell's runs)."""


@dataclass(frozen=True)
class RunInterval(Codec):
    """Median over runs and its interval (see the module docstring).

    ``confidence`` is the level the interval actually has: the requested one
    when the number of runs allows it, else the exact level of ``[min, max]``
    (``minmax_confidence``, which is ``1 - 2 * 0.5**runs``); 0 when there is
    no spread to go on. ``outliers``: positions (in the order given) of the
    runs left out of the spread.
    """

    median: float
    low: float
    high: float
    confidence: float
    min: float
    max: float
    minmax_confidence: float
    runs: int
    method: str = INTERVAL_METHOD
    outliers: Tuple[int, ...] = ()

    @property
    def half_width_rel(self) -> float:
        """The interval's larger half-width divided by the median."""
        half = max(self.median - self.low, self.high - self.median)
        return half / abs(self.median) if self.median else math.inf

    def within(self, target_rel: float) -> bool:
        """True when both half-widths are at most ``target_rel`` of the median."""
        return self.half_width_rel <= target_rel


@lru_cache(maxsize=4096)
def _sign_test_level(n: int, d: int) -> float:
    """Exact coverage of ``[x_(d), x_(n-d+1)]`` as an interval for the median.

    That is ``1 - 2 P(Binomial(n, 1/2) <= d - 1)``, summed in exact integers.
    """
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(d)) / 2 ** n


def interval_over_runs(run_medians: Sequence[float], confidence: float = 0.95) -> RunInterval:
    """Median of ``run_medians`` with a distribution-free interval and min-max.

    Arguments
    ---------
    run_medians : sequence of float
        One figure per fresh-process run (e.g. each run's median batch time).
    confidence : float
        Requested level of the interval.

    Returns
    -------
    RunInterval

    Example
    -------
    >>> iv = interval_over_runs([0.95, 1.0, 1.05, 0.9, 1.1, 1.02, 0.98, 1.01])
    >>> iv.median, iv.confidence, iv.low < iv.median < iv.high
    (1.005, 0.95, True)
    >>> interval_over_runs([1.0, 1.2, 1.1]).confidence  # 3 runs: [min, max] is a 75% interval
    0.75
    """
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
    xs = sorted(float(x) for x in run_medians)
    n = len(xs)
    if n == 0:
        raise ConfigError("an interval over runs needs at least one run")
    if not all(math.isfinite(x) for x in xs):
        raise ConfigError(f"run medians must be finite, got {xs}")
    median = summarise(xs).median
    minmax_level = 1.0 - 2.0 * 0.5 ** n
    low, high, level = xs[0], xs[-1], minmax_level
    if minmax_level >= confidence:
        d = 1
        while 2 * (d + 1) <= n and _sign_test_level(n, d + 1) >= confidence:
            d += 1
        g_d = _sign_test_level(n, d)
        low, high, level = xs[d - 1], xs[n - d], g_d
        if 2 * (d + 1) <= n:
            # Interpolation weight of Hettmansperger & Sheather between x_(d) and x_(d+1).
            share = (g_d - confidence) / (g_d - _sign_test_level(n, d + 1))
            lam = (n - d) * share / (d + (n - 2 * d) * share)
            low = (1 - lam) * xs[d - 1] + lam * xs[d]
            high = (1 - lam) * xs[n - d] + lam * xs[n - d - 1]
            level = confidence
    return RunInterval(
        median=median, low=low, high=high, confidence=level,
        min=xs[0], max=xs[-1], minmax_confidence=minmax_level, runs=n,
    )


def outlier_runs(run_medians: Sequence[float]) -> Tuple[int, ...]:
    """Positions of the runs beyond :data:`OUTLIER_MADS` scaled MADs of the median, on a log scale.

    Example
    -------
    >>> outlier_runs([1.0, 1.02, 0.99, 1.01, 1.3, 1.0])
    (4,)
    >>> outlier_runs([1.0, 1.3, 1.0, 1.0])  # 4 runs: too few to tell
    ()
    """
    if len(run_medians) < OUTLIER_MIN_RUNS or min(run_medians) <= 0:
        return ()
    logs = [math.log(x) for x in run_medians]
    centre = statistics.median(logs)
    scale = MAD_SCALE * statistics.median(abs(x - centre) for x in logs)
    if scale == 0:  # most runs identical: any other run would count; call none
        return ()
    return tuple(i for i, x in enumerate(logs) if abs(x - centre) > OUTLIER_MADS * scale)


def _kept_logs(run_medians: Sequence[float]) -> Tuple[Tuple[int, ...], List[float]]:
    outliers = outlier_runs(run_medians)
    return outliers, [math.log(x) for i, x in enumerate(run_medians) if i not in outliers]


@dataclass(frozen=True)
class SpreadPrior:
    """The spread between runs pooled over the cells of one setting: variance of log run medians, and its df.

    Example
    -------
    >>> prior = SpreadPrior.pooled([[1.0, 1.1, 0.9], [2.0, 2.0, 2.0], [5.0]])
    >>> prior.df, round(prior.variance, 4)
    (4, 0.005)
    """

    variance: float
    df: int

    @classmethod
    def pooled(cls, cells: Iterable[Sequence[float]]) -> Optional["SpreadPrior"]:
        """Pool the cells with two or more positive runs (outliers left out); ``None`` when fewer than two have."""
        squares, df, used = 0.0, 0, 0
        for run_medians in cells:
            if len(run_medians) < 2 or min(run_medians) <= 0:
                continue
            _, kept = _kept_logs(run_medians)
            squares += statistics.variance(kept) * (len(kept) - 1)
            df += len(kept) - 1
            used += 1
        return cls(variance=squares / df, df=df) if used >= 2 else None


def typical_interval(run_medians: Sequence[float], confidence: float = 0.95,
                     prior: Optional[SpreadPrior] = None) -> RunInterval:
    """Median of ``run_medians`` with a robust interval for the typical run median (see the module docstring).

    With one run, or a non-positive run (no logarithm), there is no spread to
    go on: the interval is the median alone, with level 0. ``prior``: the
    setting's pooled spread, which the cell's own is moderated toward.

    Example
    -------
    >>> iv = typical_interval([1.0, 1.02, 0.99, 1.01, 1.3, 1.0])
    >>> iv.median, iv.outliers, round(iv.low, 3), round(iv.high, 3)
    (1.005, (4,), 0.987, 1.023)
    >>> round(typical_interval([1.0, 1.001, 0.999, 1.0], prior=SpreadPrior(0.05 ** 2, 30)).high, 3)
    1.058
    """
    base = interval_over_runs(run_medians, confidence)
    median = base.median
    if base.runs < 2 or base.min <= 0:
        return replace(base, low=median, high=median, confidence=0.0, method=TYPICAL_METHOD)
    from sbprof.analysis.lsq import t_quantile  # scipy: only when an interval is computed

    outliers, kept = _kept_logs(run_medians)
    variance, df = statistics.variance(kept), len(kept) - 1
    method = TYPICAL_METHOD
    if prior is not None:
        d0 = min(PRIOR_DF, prior.df)
        variance, df, method = (d0 * prior.variance + df * variance) / (d0 + df), d0 + df, TYPICAL_METHOD + MODERATED
    half = t_quantile(confidence, df) * math.sqrt(math.pi / 2 * variance / len(kept))
    return replace(base, low=median * math.exp(-half), high=median * math.exp(half), confidence=confidence,
                   method=method, outliers=outliers)


@dataclass(frozen=True)
class RunsSummary(Codec):
    """A cell measured in several runs: the interval over runs beside the within-run spread.

    ``interval`` is the typical-value interval (what reports print, with its
    outlying runs), ``median_interval`` the order-statistics interval for the
    median over runs.
    ``within_run_iqr_rel`` is the median over runs of each run's
    interquartile range divided by its median: what one run's quartiles
    suggest, to be read beside the interval that holds across runs.
    """

    run_medians: List[float]
    interval: RunInterval
    median_interval: RunInterval
    within_run_iqr_rel: float

    @property
    def run_cv(self) -> Optional[float]:
        """Spread between the runs kept (outliers left out): standard deviation of their logarithms, ~ the CV."""
        kept = [x for i, x in enumerate(self.run_medians) if i not in self.interval.outliers]
        if len(kept) < 2 or min(kept) <= 0:
            return None
        return statistics.stdev(math.log(x) for x in kept)

    def to_dict(self) -> dict:
        """The fields, with the derived ``run_cv`` for readers of the file (dropped on read)."""
        return {**to_json(self), "run_cv": self.run_cv}


def summarise_runs(samples_per_run: Sequence[Sequence[float]], confidence: float = 0.95,
                   prior: Optional[SpreadPrior] = None) -> RunsSummary:
    """Summarise raw samples grouped by fresh-process run.

    Arguments
    ---------
    samples_per_run : sequence of sequences of float
        Each run's raw samples (e.g. its measured batch times).
    confidence : float
        Requested level of the interval over runs.
    prior : SpreadPrior, optional
        The setting's pooled spread between runs (see :func:`typical_interval`).

    Returns
    -------
    RunsSummary

    Example
    -------
    >>> s = summarise_runs([[1.0, 1.1, 0.9], [2.0, 2.2, 1.8], [1.5, 1.6, 1.4]])
    >>> s.run_medians, s.interval.median, round(s.within_run_iqr_rel, 3)
    ([1.0, 2.0, 1.5], 1.5, 0.1)
    """
    if not samples_per_run or any(len(run) == 0 for run in samples_per_run):
        raise ConfigError("every run needs at least one sample")
    stats = [summarise(run) for run in samples_per_run]
    medians = [s.median for s in stats]
    iqr_rel = summarise([s.iqr / abs(s.median) if s.median else math.inf for s in stats]).median
    return RunsSummary(run_medians=medians, interval=typical_interval(medians, confidence, prior),
                       median_interval=interval_over_runs(medians, confidence), within_run_iqr_rel=iqr_rel)


@dataclass(frozen=True)
class RepeatDecision:
    """What :meth:`RepeatPolicy.decide` concluded for one cell.

    ``target_met`` is ``None`` under fixed repeats (no target was set).
    """

    add_run: bool
    target_met: Optional[bool]
    reason: str
    interval: Optional[RunInterval]


@dataclass(frozen=True)
class RepeatPolicy:
    """Adaptive repeats: add fresh-process runs until the interval is narrow enough.

    A cell stops when it has at least ``min_runs`` runs and its
    typical-value interval (:func:`typical_interval`, at least 2 runs) is
    within ``target_rel`` of the median, or when it has ``max_runs`` runs
    (target not met). A run far outside the others widens the interval until
    enough runs exist to call it an outlier (5): the cell with one gets more
    runs, the others stop. At a 3 % spread between runs the half-width is
    about 6 % at 4 runs; at 10 % it is about 20 % at 4 runs and 11 % at 8.

    Arguments
    ---------
    target_rel : float or None
        Largest accepted half-width as a fraction of the median (0.03: +-3%);
        ``None`` for fixed repeats (see :meth:`fixed`).
    min_runs, max_runs : int
        Fewest runs before stopping, and the cap.
    confidence : float
        Level of the interval.

    Example
    -------
    >>> policy = RepeatPolicy(target_rel=0.03, min_runs=3, max_runs=8)
    >>> policy.decide([1.0, 1.01]).add_run
    True
    >>> d = policy.decide([1.0, 1.001, 0.999, 1.002, 0.998, 1.0])
    >>> d.add_run, d.target_met
    (False, True)
    """

    target_rel: Optional[float] = 0.03
    min_runs: int = 3
    max_runs: int = 10
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.target_rel is not None and not self.target_rel > 0:
            raise ConfigError(f"target_rel must be positive, got {self.target_rel}")
        if self.min_runs < 1:
            raise ConfigError(f"min_runs must be at least 1, got {self.min_runs}")
        if self.max_runs < self.min_runs:
            raise ConfigError(f"max_runs ({self.max_runs}) must be at least min_runs ({self.min_runs})")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence}")

    @classmethod
    def fixed(cls, runs: int, confidence: float = 0.95) -> "RepeatPolicy":
        """Exactly ``runs`` runs per cell, no target; the interval is still reported."""
        return cls(target_rel=None, min_runs=runs, max_runs=runs, confidence=confidence)

    def decide(self, run_medians: Sequence[float], prior: Optional[SpreadPrior] = None) -> RepeatDecision:
        """Whether a cell with these run medians needs another run, and why (``prior``: its setting's spread)."""
        n = len(run_medians)
        interval = typical_interval(run_medians, self.confidence, prior) if n else None
        width = f"+-{100 * interval.half_width_rel:.1f}%" if interval else "none"
        if self.target_rel is None:
            return RepeatDecision(n < self.max_runs, None, f"fixed repeats: {n} of {self.max_runs} runs", interval)
        target = f"+-{100 * self.target_rel:.1f}%"
        met = (interval is not None and interval.confidence >= self.confidence
               and interval.within(self.target_rel))
        if met and n >= self.min_runs:
            return RepeatDecision(False, True, f"target met after {n} runs: {width} <= {target}", interval)
        if n >= self.max_runs:
            return RepeatDecision(False, False, f"cap of {self.max_runs} runs reached: {width}, target {target}",
                                  interval)
        if n < self.min_runs:
            return RepeatDecision(True, False, f"{n} runs < minimum {self.min_runs}", interval)
        if interval.confidence < self.confidence:
            return RepeatDecision(True, False, "no interval yet (one run, or a non-positive median)", interval)
        return RepeatDecision(True, False, f"interval {width} wider than target {target}", interval)
