"""What one sweep cell shows in a markdown table: its runs summarised, or its prediction, or its status.

A cell is the list of its runs (fresh worker processes, :mod:`sbprof.runs`);
skipped and out-of-memory cells may carry a prediction
(:mod:`sbprof.predictions`), always marked ``(pred)``.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tabulate import tabulate

from sbprof.figures import batch_audio_seconds, busy_rtf
from sbprof.predictions import CellPrediction
from sbprof.record import Measurement
from sbprof.report.format import MESSAGE_CHARS, bytes_in, sig3, status_text
from sbprof.runs import median_over_runs, representative, rtf_over_runs
from sbprof.stats import METRICS, summarise

Runs = List[Measurement]
GridKey = Tuple[float, int]
Predicted = Dict[Tuple[GridKey, str], CellPrediction]


def grid_table(cells: Dict[GridKey, Runs], audio_secs: Sequence[float], batch_sizes: Sequence[int],
               render: Callable[[Runs], str], predicted: Optional[Callable[[GridKey, Measurement], Optional[str]]] = None
               ) -> str:
    """One github-format table: rows audio lengths, columns batch sizes; a cell renders its runs.

    Example
    -------
    >>> from sbprof.record import Cell
    >>> m = Measurement(label="c", status="skipped", cell=Cell(audio_s=1, batch_size=2))
    >>> print(grid_table({(1, 2): [m]}, [1], [1, 2], render=str))
    | audio \\ batch   | 1            | 2       |
    |-----------------|--------------|---------|
    | 1 s             | not measured | skipped |
    """
    rows = []
    for a in audio_secs:
        row = [f"{a:g} s"]
        for b in batch_sizes:
            runs = cells.get((a, b))
            rep = representative(runs) if runs else None
            status = status_text(rep)
            guess = predicted((a, b), rep) if predicted is not None and rep is not None and not rep.ok else None
            if guess is not None:
                status = guess if rep.status == "skipped" else f"{status} {guess}"
            row.append(status or render(runs))
        rows.append(row)
    headers = ["audio \\ batch"] + [str(b) for b in batch_sizes]
    # disable_numparse: cells are already formatted; tabulate must not re-round them.
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=["left"] * len(headers))


def rtf_text(runs: Runs, target: Optional[float]) -> str:
    """One run: ``median [q1, q3]`` over its batches. Several: ``median [low, high] +-w% (n)``, ``*`` if above target."""
    ok = [m for m in runs if m.ok]
    if len(ok) == 1:
        s = summarise([w / batch_audio_seconds(ok[0]) for w in ok[0].wall_s])
        return f"{sig3(s.median)} [{sig3(s.q1)}, {sig3(s.q3)}]"
    summary = rtf_over_runs(ok)
    i = summary.interval
    missed = "*" if target is not None and not (i.confidence >= _nominal(ok) and i.within(target)) else ""
    return (f"{sig3(i.median)} [{sig3(i.low)}, {sig3(i.high)}] ±{50 * summary.within_run_iqr_rel:.1f}% "
            f"({len(ok)}){missed}")


def _nominal(runs: Runs) -> float:
    return float(runs[0].settings.get("repeats", {}).get("confidence", 0.95))


def rtfx_text(runs: Runs) -> str:
    summary = rtf_over_runs(runs)
    return sig3(1 / summary.interval.median) if summary.interval.median > 0 else "n/a"


def busy_text(runs: Runs) -> str:
    rep = representative(runs)
    busy = busy_rtf(rep)
    if busy is None:
        error = rep.extra.get("profile_error")
        return f"n/a ({error[:MESSAGE_CHARS]})".replace("|", "/") if error else "n/a"
    return f"{busy['host_busy_rtf']:.2E} / {busy['gpu_busy_rtf']:.2E} of {busy['profiled_rtf']:.2E}"


def memory_text(metric: str) -> Callable[[Runs], str]:
    """The median over runs of one memory field, in its metric's unit."""
    unit = METRICS[metric].unit

    def render(runs: Runs) -> str:
        return bytes_in(unit, median_over_runs(runs, lambda m: getattr(m.memory, metric) if m.memory else None))

    return render


def rtfx_prediction_text(predicted: Predicted) -> Callable[[GridKey, Measurement], Optional[str]]:
    """``~value [low, high] (pred)`` in RTFx (audio seconds / predicted time) for a cell with a predicted time."""

    def render(key: GridKey, rep: Measurement) -> Optional[str]:
        p = predicted.get((key, "time_s"))
        if p is None or p.value <= 0:
            return None
        audio = key[0] * key[1]
        high = sig3(audio / p.low) if p.low > 0 else "inf"
        return f"~{sig3(audio / p.value)} [{sig3(audio / p.high)}, {high}] (pred)"

    return render


def prediction_text(predicted: Predicted, figure: str, unit: str) -> Callable[[GridKey, Measurement], Optional[str]]:
    """``~value [low, high] (pred)`` for a cell's predicted figure, in RTF for time or the unit for memory."""

    def render(key: GridKey, rep: Measurement) -> Optional[str]:
        p = predicted.get((key, figure))
        if p is None:
            return None
        if figure == "time_s":
            audio = key[0] * key[1]
            return f"~{sig3(p.value / audio)} [{sig3(p.low / audio)}, {sig3(p.high / audio)}] (pred)"
        return f"~{bytes_in(unit, p.value)} [{bytes_in(unit, p.low)}, {bytes_in(unit, p.high)}] (pred)"

    return render
