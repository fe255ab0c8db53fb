"""The median over fresh-process runs, with an interval that holds from run to run.

On these machines the spread between fresh processes (CV ~10%) is several
times the spread of one run's batches (~+-3%), so a cell's uncertainty must
come from its run medians, not from one run's quartiles.

Two intervals answer two questions.

*Where will the next run of this sweep put this cell?* (:func:`next_run_interval`,
what reports print.) A prediction interval for the median over ``n`` runs
of a repeat of the same sweep: run medians taken as log-normal, ``s`` the
standard deviation of their logarithms, the median over ``n`` runs varies
with about ``sqrt(pi / 2) * s / sqrt(n)`` (the sample median's efficiency),
and the difference of two such medians with ``sqrt(2)`` times that, so
``median * exp(+-t(n-1) * s * sqrt(pi / n))`` with Student's ``t`` for the
estimated ``s``. Measured by ``benchmarks/interval_coverage.py``: a
confidence interval for the median, below, held on the next sweep in only
56-67% of cells, because it describes where the true median lies, not
where another noisy estimate of it lands (two estimates differ by
``sqrt(2)`` times one's error), and because run medians are skewed, which
leaves the order-statistics interval's lower edge close to the median.

*Where is the median of this machine's runs?* (:func:`interval_over_runs`,
kept in the results.) The distribution-free confidence interval for the median of
the run medians, from interpolated order statistics (Hettmansperger &
Sheather, 1986): the sign-test interval ``[x_(d), x_(n-d+1)]`` has exact
coverage ``1 - 2 P(Binomial(n, 1/2) < d)`` for any continuous distribution,
and interpolating between neighbouring order statistics brings that to the
requested level. Chosen over a percentile bootstrap of the median, which is
discrete with few runs and covered the true median in only 92-94% of
simulated 95% intervals (5-20 lognormal runs); this one covered 94-96%.
Below 6 runs no pair of order statistics reaches 95%: the interval is then
``[min, max]`` and its exact (lower) level is reported instead.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import List, Optional, Sequence

from sbprof.errors import ConfigError
from sbprof.stats import summarise

INTERVAL_METHOD = "distribution-free interval for the median of run medians (interpolated order statistics)"
NEXT_RUN_METHOD = ("prediction interval for the median over as many runs of a repeat of the sweep "
                   "(log-normal run medians, Student t)")


@dataclass(frozen=True)
class RunInterval:
    """Median over runs and its interval (see the module docstring).

    ``confidence`` is the level the interval actually has: the requested one
    when the number of runs allows it, else the exact level of ``[min, max]``
    (``minmax_confidence``, which is ``1 - 2 * 0.5**runs``).
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

    @property
    def half_width_rel(self) -> float:
        """The interval's larger half-width divided by the median."""
        half = max(self.median - self.low, self.high - self.median)
        return half / abs(self.median) if self.median else math.inf

    def within(self, target_rel: float) -> bool:
        """True when both half-widths are at most ``target_rel`` of the median."""
        return self.half_width_rel <= target_rel

    def to_dict(self) -> dict:
        return asdict(self)


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


def next_run_interval(run_medians: Sequence[float], confidence: float = 0.95) -> RunInterval:
    """Median of ``run_medians`` with a prediction interval for the median of a repeat of the same runs.

    With one run there is no spread to go on: the interval is the median
    alone with level 0 (and non-positive medians, which have no logarithm,
    get the same).

    Example
    -------
    >>> iv = next_run_interval([1.0, 1.1, 0.9, 1.05])
    >>> iv.median, iv.confidence, round(iv.low, 3), round(iv.high, 3)
    (1.025, 0.95, 0.804, 1.306)
    """
    return _next_run(interval_over_runs(run_medians, confidence), run_medians, confidence)


def _next_run(base: RunInterval, run_medians: Sequence[float], confidence: float) -> RunInterval:
    """The next-run interval around ``base``'s median (``base``: the median's interval of the same runs)."""
    from sbprof.analysis.lsq import t_quantile  # scipy: only when an interval is computed

    n, median = base.runs, base.median
    if n < 2 or base.min <= 0:
        return replace(base, low=median, high=median, confidence=0.0, method=NEXT_RUN_METHOD)
    s = statistics.stdev(math.log(x) for x in run_medians)
    half = t_quantile(confidence, n - 1) * s * math.sqrt(math.pi / n)
    return replace(base, low=median * math.exp(-half), high=median * math.exp(half), confidence=confidence,
                   method=NEXT_RUN_METHOD)


@dataclass(frozen=True)
class RunsSummary:
    """A cell measured in several runs: the interval over runs beside the within-run spread.

    ``interval`` is the next-run interval (what reports print),
    ``median_interval`` the confidence interval for the median over runs.
    ``within_run_iqr_rel`` is the median over runs of each run's
    interquartile range divided by its median: what one run's quartiles
    suggest, to be read beside the interval that holds across runs.
    """

    run_medians: List[float]
    interval: RunInterval
    median_interval: RunInterval
    within_run_iqr_rel: float

    def to_dict(self) -> dict:
        return {"run_medians": list(self.run_medians), "interval": self.interval.to_dict(),
                "median_interval": self.median_interval.to_dict(), "within_run_iqr_rel": self.within_run_iqr_rel}


def summarise_runs(samples_per_run: Sequence[Sequence[float]], confidence: float = 0.95) -> RunsSummary:
    """Summarise raw samples grouped by fresh-process run.

    Arguments
    ---------
    samples_per_run : sequence of sequences of float
        Each run's raw samples (e.g. its measured batch times).
    confidence : float
        Requested level of the interval over runs.

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
    median_interval = interval_over_runs(medians, confidence)
    return RunsSummary(run_medians=medians, interval=_next_run(median_interval, medians, confidence),
                       median_interval=median_interval, within_run_iqr_rel=iqr_rel)


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

    A cell stops when it has at least ``min_runs`` runs and its next-run
    interval (:func:`next_run_interval`, at least 2 runs) has both
    half-widths within ``target_rel`` of the median, or when it has
    ``max_runs`` runs (target not met). With a between-run CV of 10% the
    95% interval's larger half-width is typically 45% of the median at 3
    runs, 28% at 4, 19% at 6, 13% at 10, 8.6% at 20 (simulated, lognormal
    runs; the next repeat's median fell inside it in 96-97% of
    simulations): +-3% takes about 140 runs, so on a machine that noisy
    cells stop at the cap, and the report says so.

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

    def decide(self, run_medians: Sequence[float]) -> RepeatDecision:
        """Whether a cell with these run medians needs another run, and why."""
        n = len(run_medians)
        interval = next_run_interval(run_medians, self.confidence) if n else None
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
