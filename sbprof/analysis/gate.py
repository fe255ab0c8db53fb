"""The regression gate: a baseline's results against a new run's, cell by cell, with a noise-aware verdict.

Records are matched on every coordinate but the run index. For each matched
cell, each side's raw samples are grouped by run (fresh process) and handed
to :func:`sbprof.analysis.verdict.compare_runs` (Hodges-Lehmann ratio of run
figures with its exact Mann-Whitney interval; each run's median by default,
or a low percentile such as ``p10`` that shrugs off episodes of contention
on a shared machine): ``regressed`` only when the interval excludes 1 *and*
the change is beyond the threshold.

Metrics:

- ``rtf``: each measured call's time / seconds of audio it processed;
- ``peak_memory``: the peak of the memory call (process resident peak on
  CPU, allocator peak on CUDA), one value per run.

On CPU time when the load explains the wall time. A cell measured on the
CPU whose runs kept their CPU times (``cpu_s``, all the worker's threads)
is judged on its CPU cost (CPU time / audio seconds) instead of its RTF
when other processes kept at least
:data:`~sbprof.analysis.runs.LOAD_EXPLAINS` cores busy beside either
side's runs and the CPU-time ratio's interval is narrower than the
wall-time one (:func:`~sbprof.analysis.runs.load_explains_widths`, the
rule adaptive repeats follow): a run that waited for a core is slower in
wall time without the code being slower, and that waiting, not the model,
made the wall-time spread. The row says so (``judged on CPU time``).

Too few runs. A run-level verdict needs at least 4 runs a side at 95%
(between-process noise, ~10% here, cannot be seen in fewer). Such a cell is
reported as ``too few runs`` and, by default, *not judged*: the gate then
fails with the "cannot judge" exit status rather than pass on evidence it
does not have. With ``within_run=True`` it falls back to a clearly labelled
within-run comparison: every call of every run taken as one sample, which
sees only the spread inside processes and so flags unchanged code far more
often than the stated level (see ``benchmarks/gate_power.py``).

A cell measured OK in the baseline that fails (OOM, error) in the new run is
a regression; the reverse an improvement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from sbprof.analysis.verdict import Verdict, compare_runs, run_statistic
from sbprof.base.errors import ConfigError
from sbprof.analysis.figures import peak_gb
from sbprof.analysis.runs import has_cpu, load_explains_widths, others_load
from sbprof.record import Measurement
from sbprof.record.results import Results, differences

GATE_METRICS = {
    "rtf": "real-time factor of each measured call (time / seconds of audio)",
    "peak_memory": "peak memory of the memory call (process resident peak on CPU, CUDA allocator peak on CUDA)",
}
HARDWARE_KEYS = ("cpu", "cpu_count", "gpu")
WITHIN_RUN = "within-run: every call taken as a sample; between-process noise unseen, false alarms likely"
RUN_LEVEL = "run-level: one figure per fresh process"


def min_runs(confidence: float) -> int:
    """Fewest runs a side for which the exact interval can reach ``confidence``.

    Example
    -------
    >>> min_runs(0.95), min_runs(0.80)
    (4, 3)
    """
    return next(r for r in range(1, 64) if 2 / math.comb(2 * r, r) <= 1 - confidence)


def cell_name(key: Tuple) -> str:
    """A cell's coordinates for people (run left out), e.g. ``encoder_asr cpu/1t 2 s x4``."""
    model, variant, device, threads, audio_s, batch_size, _input, rank, params = key
    parts = [f"{model} ({variant})" if variant else str(model), f"{device}/{threads}t"]
    if audio_s is not None:
        parts.append(f"{audio_s:g} s")
    if batch_size is not None:
        parts.append(f"x{batch_size}")
    parts += [f"{k}={v}" for k, v in params]
    if rank is not None:
        parts.append(f"rank {rank}")
    return " ".join(parts)


def _group(results: Results) -> Dict[Tuple, List[Measurement]]:
    groups: Dict[Tuple, List[Measurement]] = {}
    for m in results.records:
        if m.status == "skipped":
            continue
        key = m.cell.key()
        groups.setdefault(key[:7] + key[8:], []).append(m)  # every coordinate but the run
    return groups


def run_samples(records: Sequence[Measurement], metric: str) -> List[List[float]]:
    """Each ok run's samples of ``metric`` (see the module docstring).

    Example
    -------
    >>> run_samples([Measurement(label="c", wall_s=[0.2, 0.4], audio_seconds=2.0)], "rtf")
    [[0.1, 0.2]]
    """
    runs = []
    for m in records:
        if not m.ok:
            continue
        if metric == "rtf":
            if not m.audio_seconds:
                raise ConfigError(f"{m.label}: no audio seconds recorded, so no RTF; use --metric peak_memory")
            runs.append([s / m.audio_seconds for s in m.wall_s])
        elif metric == "cpu_cost":
            runs.append([s / m.audio_seconds for s in m.cpu_s] if has_cpu(m) and m.audio_seconds else [])
        else:
            peak = peak_gb(m)
            if peak is not None:
                runs.append([peak])
    return [r for r in runs if r]


@dataclass(frozen=True)
class GateRow:
    """The outcome for one cell: ``status`` is regressed, improved, unchanged, too few runs, or failed."""

    cell: str
    status: str
    baseline_runs: int
    candidate_runs: int
    verdict: Optional[Verdict] = None
    method: str = RUN_LEVEL
    note: str = ""
    on_cpu: bool = False


def describe_row(row: GateRow) -> str:
    """One line for a row: the cell, its status, the change with its interval, how it was judged.

    Example
    -------
    >>> describe_row(GateRow("m cpu/1t 1 s", "too few runs", 1, 1, note="1 baseline / 1 new run(s)"))
    'm cpu/1t 1 s: too few runs (1 baseline / 1 new run(s))'
    """
    text = f"{row.cell}: {row.status}"
    if row.verdict is not None:
        v = row.verdict
        how = f"runs, each run's {v.statistic}" if row.method == RUN_LEVEL else "samples"
        text += (f", new/baseline {v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}] at {100 * v.confidence:.1f}% "
                 f"({v.baseline_runs} vs {v.candidate_runs} {how}; {row.method})")
    if row.note and (row.verdict is None or row.method != RUN_LEVEL or row.on_cpu):
        text += f" ({row.note})" if row.verdict is None else f"; {row.note}"
    return text


@dataclass
class GateReport:
    """Every row, what could not be matched or holds no figure of the metric, and what differs between the two
    environments; ``within_run``: whether a within-run comparison was allowed."""

    metric: str
    threshold: float
    confidence: float
    statistic: str = "median"
    within_run: bool = False
    rows: List[GateRow] = field(default_factory=list)
    unmeasured: List[str] = field(default_factory=list)
    only_baseline: List[str] = field(default_factory=list)
    only_candidate: List[str] = field(default_factory=list)
    environment_notes: List[str] = field(default_factory=list)

    @property
    def regressed(self) -> List[GateRow]:
        return [r for r in self.rows if r.status == "regressed"]

    @property
    def unjudged(self) -> List[GateRow]:
        return [r for r in self.rows if r.status == "too few runs"]

    @property
    def verdict_counts(self) -> Dict[str, int]:
        """How many rows got each verdict, verdicts in alphabetical order."""
        counts: Dict[str, int] = {}
        for r in self.rows:
            counts[r.status] = counts.get(r.status, 0) + 1
        return dict(sorted(counts.items()))


def _judge(key: Tuple, base: List[Measurement], cand: List[Measurement], metric: str, threshold: float,
           confidence: float, within_run: bool, statistic: str) -> Optional[GateRow]:
    """The cell's row; ``None`` when a side that measured fine holds no figure of ``metric`` (e.g. the record of
    a training world, whose ranks hold the memory figures), so there is nothing to judge."""
    name = cell_name(key)
    b_runs, c_runs = run_samples(base, metric), run_samples(cand, metric)
    counts = dict(baseline_runs=len(b_runs), candidate_runs=len(c_runs))
    if not b_runs or not c_runs:
        b_failed, c_failed = [m for m in base if not m.ok], [m for m in cand if not m.ok]
        if b_runs and c_failed:
            return GateRow(name, "regressed", **counts, note=f"fails in the new run ({c_failed[0].status}: "
                                                             f"{c_failed[0].message[:80]})")
        if c_runs and b_failed:
            return GateRow(name, "improved", **counts, note="failed in the baseline, runs now")
        if b_failed and c_failed:
            return GateRow(name, "failed", **counts, note="no measured run on either side")
        return None
    need = min_runs(confidence)
    if min(len(b_runs), len(c_runs)) >= need:
        v = compare_runs(b_runs, c_runs, threshold, confidence, statistic=statistic)
        on_cpu = _on_cpu(base, cand, v, metric, threshold, confidence, statistic) if metric == "rtf" else None
        if on_cpu is not None:
            cpu, load = on_cpu
            return GateRow(name, cpu.verdict, **counts, verdict=cpu, on_cpu=True,
                           note=f"judged on CPU time: load {load:.1f} beside the run explains the wall-time spread "
                                f"(wall time: {v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}], {v.verdict})")
        return GateRow(name, v.verdict, **counts, verdict=v)
    short = f"{len(b_runs)} baseline / {len(c_runs)} new run(s); a run-level verdict needs {need} a side"
    if not within_run:
        return GateRow(name, "too few runs", **counts, note=short)
    flat_b = [[x] for run in b_runs for x in run]
    flat_c = [[x] for run in c_runs for x in run]
    if min(len(flat_b), len(flat_c)) < need:
        return GateRow(name, "too few runs", **counts, method=WITHIN_RUN, note=f"{short}; too few samples too")
    v = compare_runs(flat_b, flat_c, threshold, confidence)
    return GateRow(name, v.verdict, **counts, verdict=v, method=WITHIN_RUN, note=short)


def _width(v: Verdict) -> float:
    """Relative half-width of a ratio interval (on the log scale, as the ratio is estimated)."""
    return math.log(v.high / v.low) / 2 if v.low > 0 and v.high > 0 else math.inf


def _on_cpu(base: List[Measurement], cand: List[Measurement], wall: Verdict, metric: str, threshold: float,
            confidence: float, statistic: str) -> Optional[Tuple[Verdict, float]]:
    """The CPU-time verdict and the load, when others' load explains the wall-time spread (module docstring)."""
    b_ok, c_ok = [m for m in base if m.ok], [m for m in cand if m.ok]
    if not all(has_cpu(m) for m in b_ok + c_ok):
        return None
    loads = [x for x in (others_load(b_ok), others_load(c_ok)) if x is not None]
    load = max(loads) if loads else None
    cpu = compare_runs(run_samples(b_ok, "cpu_cost"), run_samples(c_ok, "cpu_cost"), threshold, confidence,
                       statistic=statistic)
    return (cpu, load) if load_explains_widths(load, _width(wall), _width(cpu)) else None


def gate(baseline: Results, candidate: Results, metric: str = "rtf", threshold: float = 0.05,
         confidence: float = 0.95, within_run: bool = False, any_machine: bool = False,
         statistic: str = "median") -> GateReport:
    """Compare every cell of ``candidate`` with the same cell of ``baseline``.

    Arguments
    ---------
    baseline, candidate : Results
        Two results files (sweeps, comparisons or budgets).
    metric : str
        ``rtf`` or ``peak_memory`` (both: lower is better).
    threshold : float
        Smallest relative change that counts (0.05: 5%).
    confidence : float
        Level of each verdict's interval.
    within_run : bool
        Fall back to within-run samples for cells with too few runs (see the module docstring).
    any_machine : bool
        Compare results from different hardware (otherwise refused: the
        verdict would measure the machines, not the code).
    statistic : str
        The figure each run is reduced to: ``median``, ``min`` or ``pNN``
        (:func:`sbprof.analysis.verdict.run_statistic`).

    Returns
    -------
    GateReport

    Example
    -------
    >>> from sbprof.record import Cell
    >>> def runs(scale):
    ...     return Results("compare", records=[Measurement(label="p", cell=Cell(model="m", audio_s=1.0, run=r),
    ...         wall_s=[scale * (1 + 0.02 * r)], audio_seconds=1.0) for r in range(5)])
    >>> [r.status for r in gate(runs(1.0), runs(1.3)).rows], [r.status for r in gate(runs(1.0), runs(1.0)).rows]
    (['regressed'], ['unchanged'])
    """
    if metric not in GATE_METRICS:
        raise ConfigError(f"metric must be one of {', '.join(GATE_METRICS)}, got {metric!r}")
    if not 0.5 <= confidence < 1:
        raise ConfigError(f"confidence must be in [0.5, 1), got {confidence}")
    run_statistic(statistic)  # a bad name fails here, before any cell
    hardware = differences(baseline.machine, candidate.machine, HARDWARE_KEYS)
    if hardware and not any_machine:
        raise ConfigError(f"the two results come from different hardware ({'; '.join(hardware)}): a verdict would "
                          "compare machines, not code (pass --any-machine to compare anyway)")
    notes = differences(baseline.machine, candidate.machine)
    notes += [f"rule {d}" for d in differences(baseline.rules, candidate.rules)]
    report = GateReport(metric=metric, threshold=threshold, confidence=confidence, statistic=statistic,
                        within_run=within_run, environment_notes=notes)
    base, cand = _group(baseline), _group(candidate)
    report.only_baseline = [cell_name(k) for k in base if k not in cand]
    report.only_candidate = [cell_name(k) for k in cand if k not in base]
    for key in base:
        if key in cand:
            row = _judge(key, base[key], cand[key], metric, threshold, confidence, within_run, statistic)
            if row is None:
                report.unmeasured.append(cell_name(key))
            else:
                report.rows.append(row)
    if not report.rows:
        if report.unmeasured:
            raise ConfigError(f"no cell the two results share holds a {metric} figure on both sides: nothing to "
                              "compare (see --metric)")
        raise ConfigError("the two results share no cell (model, variant, device, threads, length, batch size, "
                          "input): nothing to compare")
    return report
