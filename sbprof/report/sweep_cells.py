"""What one sweep cell shows in a markdown table: its runs summarised, or its prediction, or its status.

Each function formats a :class:`~sbprof.analysis.sweep.SweepCell` (figures
already computed); skipped and out-of-memory cells may carry a prediction,
always marked ``(pred)``.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

from tabulate import tabulate

from sbprof.analysis.sweep import GridKey, SweepCell
from sbprof.report.format import MESSAGE_CHARS, bytes_in, plural, sig3, status_text

CPU_COST = ("CPU cost = CPU time of the worker's threads / audio seconds: what a CPU core spends to serve this model, "
            "independent of waiting for a core; with several threads it includes threads that spin while waiting "
            "(OpenMP)")


Render = Callable[[SweepCell], str]
Predicted = Callable[[SweepCell], Optional[str]]


def grid_table(cells: Dict[GridKey, SweepCell], audio_secs: Sequence[float], batch_sizes: Sequence[int],
               render: Render, predicted: Optional[Predicted] = None) -> str:
    """One github-format table: rows audio lengths, columns batch sizes; a cell renders its summary.

    Example
    -------
    >>> print(grid_table({(1, 2): SweepCell(status="skipped", runs=0)}, [1], [1, 2], render=str))
    | audio \\ batch   | 1            | 2       |
    |-----------------|--------------|---------|
    | 1 s             | not measured | skipped |
    """
    rows = []
    for a in audio_secs:
        row = [f"{a:g} s"]
        for b in batch_sizes:
            cell = cells.get((a, b))
            status = status_text(cell)
            guess = predicted(cell) if predicted is not None and cell is not None and not cell.runs else None
            if guess is not None:
                status = guess if cell.status == "skipped" else f"{status} {guess}"
            row.append(status or render(cell))
        rows.append(row)
    headers = ["audio \\ batch"] + [str(b) for b in batch_sizes]
    # disable_numparse: cells are already formatted; tabulate must not re-round them.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=["left"] * len(headers))


def rtf_text(cell: SweepCell) -> str:
    """One run: ``median [q1, q3]`` of its batches; several: ``median [low, high] +-w% (n)`` (``n, k outlier``
    when runs were left out of the spread), ``*`` above target."""
    if cell.one_run is not None:
        s = cell.one_run
        return f"{sig3(s.median)} [{sig3(s.q1)}, {sig3(s.q3)}]{'*' if cell.target_missed else ''}"
    i = cell.over_runs.interval
    runs = f"{cell.runs}, {plural(len(i.outliers), 'outlier')}" if i.outliers else str(cell.runs)
    return (f"{sig3(i.median)} [{sig3(i.low)}, {sig3(i.high)}] ±{50 * cell.over_runs.within_run_iqr_rel:.1f}% "
            f"({runs}){'*' if cell.target_missed else ''}")


def cpu_cost_text(cell: SweepCell) -> str:
    """A cell's CPU cost like its RTF (:func:`rtf_text`); ``(judged)`` marks the cells whose precision was judged
    on it; ``n/a`` where no CPU time was kept.

    Example
    -------
    >>> from sbprof.base.stats import summarise
    >>> cpu_cost_text(SweepCell(status="ok", runs=1, cpu_one_run=summarise([0.1, 0.2, 0.3])))
    '0.200 [0.150, 0.250]'
    """
    if cell.cpu_one_run is not None:
        s = cell.cpu_one_run
        return f"{sig3(s.median)} [{sig3(s.q1)}, {sig3(s.q3)}]{'*' if cell.target_missed else ''}"
    if cell.cpu_over_runs is None:
        return "n/a"
    i = cell.cpu_over_runs.interval
    return (f"{sig3(i.median)} [{sig3(i.low)}, {sig3(i.high)}] ±{50 * cell.cpu_over_runs.within_run_iqr_rel:.1f}% "
            f"({cell.runs}){' (judged)' if cell.judged_on_cpu else ''}{'*' if cell.target_missed else ''}")


def rtfx_text(cell: SweepCell) -> str:
    return sig3(cell.rtfx) if cell.rtfx else "n/a"


def busy_text(cell: SweepCell) -> str:
    if cell.busy is None:
        error = cell.busy_error
        return f"n/a ({error[:MESSAGE_CHARS]})".replace("|", "/") if error else "n/a"
    busy = cell.busy
    return f"{busy.host:.2E} / {busy.gpu:.2E} of {busy.profiled:.2E}"


def memory_text(which: str, unit: str) -> Render:
    """The median over runs of the memory one batch adds (``added``) or the peak (``peak``), in ``unit``."""
    return lambda cell: bytes_in(unit, getattr(cell, f"{which}_bytes"))


BEYOND = "beyond the measured range"


def rtfx_prediction_text(cell: SweepCell) -> Optional[str]:
    """``~value [low, high] (pred)`` of a cell's predicted RTFx; beyond the measured range, ``<= bound`` (a time
    bounded below is an RTFx bounded above)."""
    p = cell.predicted.get("rtfx")
    if p is None:
        return None
    if p.beyond:
        return f"{BEYOND}: <= {sig3(p.high)}"
    return f"~{sig3(p.value)} [{sig3(p.low)}, {'inf' if p.high is None else sig3(p.high)}] (pred)"


def prediction_text(figure: str, unit: str) -> Predicted:
    """``~value [low, high] (pred)`` for a cell's predicted ``figure`` (``rtf``, or a memory figure shown in
    ``unit``); ``beyond the measured range: >= bound`` where only a lower bound is known."""

    def render(cell: SweepCell) -> Optional[str]:
        p = cell.predicted.get(figure)
        if p is None:
            return None
        text = sig3 if figure == "rtf" else (lambda v: bytes_in(unit, v))
        if p.beyond:
            return f"{BEYOND}: >= {text(p.low)}"
        return f"~{text(p.value)} [{text(p.low)}, {text(p.high)}] (pred)"

    return render
