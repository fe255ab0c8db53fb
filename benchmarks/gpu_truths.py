"""The GPU check's ground truths: how one of sbprof's figures is compared with an outside reference, and the table.

Each CUDA ground-truth test (``@pytest.mark.cuda``) measures a figure with sbprof
and the same thing from outside (CUDA events recorded by the test, an analytic
count, ``torch.cuda.max_memory_allocated``, NVML's own power readings, a
simulation of the same queue), then calls one of the comparisons here. A
comparison returns a :class:`Figure`: both values with their units, how far
apart they are, the tolerance, and whether it holds. :func:`check` records the
figure (one JSON line appended to the file named by ``$SBPROF_GPU_FIGURES``,
when set: what ``benchmarks/gpu_check.py`` collects into its table) and asserts
that it holds, so the test fails exactly when its row reads "no".

The comparisons are pure (no torch, no clocks) and tested on the CPU with
recorded numbers (``tests/benchmarks/test_gpu_truths.py``).

Example
-------
>>> f = relative("step time", 10.2e-3, 10.0e-3, 0.02, "s")
>>> (f.holds, f.agreement)
(True, '+2.0 % (tolerance ±2 %)')
"""
from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

FIGURES_ENV = "SBPROF_GPU_FIGURES"
"""The environment variable naming the JSON-lines file each checked figure is appended to."""
REPORTS_ENV = "SBPROF_GPU_REPORTS"
"""The environment variable naming the folder where tests keep the reports their jobs wrote on the GPU."""

COLUMNS = ("figure", "sbprof", "outside reference", "agreement", "holds?")


@dataclass(frozen=True)
class Figure:
    """One row of the GPU check's table. ``holds`` is None for a row that was not compared (skipped, failed
    before comparing, timed out); ``note`` then says why."""

    figure: str
    sbprof: str
    reference: str
    agreement: str
    holds: Optional[bool]
    note: str = ""
    source: str = ""

    def row(self) -> List[str]:
        holds = "n/a" if self.holds is None else ("yes" if self.holds else "NO")
        agreement = self.agreement + (f" ({self.note})" if self.note else "")
        return [self.figure, self.sbprof, self.reference, agreement, holds]


def fmt(value: Optional[float], unit: str = "") -> str:
    """A value with 4 significant digits and its unit ("n/a" for None).

    Example
    -------
    >>> fmt(0.0123456, "s"), fmt(None), fmt(1234567.0, "B")
    ('0.01235 s', 'n/a', '1.235e+06 B')
    """
    if value is None:
        return "n/a"
    return f"{value:.4g}{' ' + unit if unit else ''}"


def relative(what: str, sbprof: float, reference: float, tolerance: float, unit: str = "",
             one_sided: bool = False) -> Figure:
    """sbprof's value within ``tolerance`` (relative) of the reference; ``one_sided``: sbprof may not read less
    than the reference (its clock encloses the reference's), only up to ``tolerance`` more.

    Example
    -------
    >>> relative("x", 1.03, 1.0, 0.02).holds, relative("x", 0.99, 1.0, 0.02, one_sided=True).holds
    (False, False)
    """
    if not reference or not math.isfinite(sbprof) or not math.isfinite(reference):
        return Figure(what, fmt(sbprof, unit), fmt(reference, unit), "not comparable", False)
    diff = sbprof / reference - 1
    slack = tolerance + 1e-12  # a value exactly at the tolerance holds, whatever the last bit of the division
    holds = (-1e-12 <= diff <= slack) if one_sided else abs(diff) <= slack
    bound = f"0 to +{tolerance * 100:g} %" if one_sided else f"±{tolerance * 100:g} %"
    return Figure(what, fmt(sbprof, unit), fmt(reference, unit), f"{diff * 100:+.1f} % (tolerance {bound})", holds)


def medians(what: str, sbprof: Sequence[float], reference: Sequence[float], tolerance: float, unit: str = "",
            one_sided: bool = False) -> Figure:
    """The median of sbprof's samples against the median of the reference's, as :func:`relative`.

    Example
    -------
    >>> medians("step", [10.1, 10.3, 10.2], [10.0, 10.1, 10.05], 0.02, "ms").holds
    True
    """
    if not sbprof or not reference:
        return Figure(what, f"{len(sbprof)} samples", f"{len(reference)} samples", "no samples", False)
    figure = relative(what, statistics.median(sbprof), statistics.median(reference), tolerance, unit, one_sided)
    return Figure(figure.figure + f" (median of {len(sbprof)} / {len(reference)})", figure.sbprof, figure.reference,
                  figure.agreement, figure.holds)


def exact(what: str, sbprof: int, reference: int, unit: str = "B") -> Figure:
    """Equal, to the unit.

    Example
    -------
    >>> exact("peak", 1024, 1024).agreement, exact("peak", 1536, 1024).holds
    ('exact', False)
    """
    diff = int(sbprof) - int(reference)
    return Figure(what, f"{int(sbprof):,} {unit}", f"{int(reference):,} {unit}",
                  "exact" if diff == 0 else f"off by {diff:+,} {unit}", diff == 0)


def allocator_bytes(sizes: Iterable[int], granularity: int = 512) -> int:
    """What PyTorch's CUDA caching allocator counts as allocated for tensors of these byte sizes: each request
    rounded up to a multiple of 512 bytes (its smallest block), as ``memory_allocated`` reports it.

    Example
    -------
    >>> allocator_bytes([1, 512, 513, 1000])
    3072
    """
    return sum(max(1, math.ceil(n / granularity)) * granularity for n in sizes)


def sum_and_top(what: str, sbprof: Mapping[str, float], reference: Mapping[str, float], tolerance: float,
                unit: str = "ms") -> Figure:
    """The rows' sum within ``tolerance`` of the reference's sum, and the same row on top.

    Example
    -------
    >>> f = sum_and_top("modules", {"a": 5.1, "b": 2.0}, {"a": 5.0, "b": 2.05}, 0.05)
    >>> f.holds, f.sbprof
    (True, 'sum 7.1 ms, top a')
    """
    if not sbprof or not reference:
        return Figure(what, str(dict(sbprof)), str(dict(reference)), "no rows", False)
    s, r = sum(sbprof.values()), sum(reference.values())
    top_s, top_r = max(sbprof, key=sbprof.__getitem__), max(reference, key=reference.__getitem__)
    total = relative(what, s, r, tolerance, unit)
    same = top_s == top_r
    return Figure(what, f"sum {fmt(s, unit)}, top {top_s}", f"sum {fmt(r, unit)}, top {top_r}",
                  total.agreement + ("; same top" if same else "; another top"), bool(total.holds and same))


def within_count(what: str, sbprof: int, reference: int, slack: int = 1, unit: str = "") -> Figure:
    """Two counts at most ``slack`` apart.

    Example
    -------
    >>> within_count("streams", 4, 3).holds, within_count("streams", 5, 3).holds
    (True, False)
    """
    diff = int(sbprof) - int(reference)
    return Figure(what, f"{sbprof}{' ' + unit if unit else ''}", f"{reference}{' ' + unit if unit else ''}",
                  f"{diff:+d} (tolerance ±{slack})", abs(diff) <= slack)


def share_of_peak(what: str, achieved_flops_per_s: float, reference_flops_per_s: float, peak_flops_per_s: float,
                  peak_precision: str, work_precision: str, tolerance: float) -> Figure:
    """Achieved FLOP/s against the analytic FLOPs over the reference's time, and the share of peak read against
    the peak of the work's own precision: it must lie in (0, 1] (above 1, the peak is too low: another
    precision's), and the two precisions must be the same.

    Example
    -------
    >>> share_of_peak("mm", 700e12, 705e12, 989.5e12, "bf16", "bf16", 0.05).holds
    True
    >>> share_of_peak("mm", 700e12, 705e12, 67e12, "fp32", "bf16", 0.05).holds  # the fp32 peak for bf16 work
    False
    """
    rate = relative(what, achieved_flops_per_s, reference_flops_per_s, tolerance, "FLOP/s")
    share = achieved_flops_per_s / peak_flops_per_s if peak_flops_per_s else math.nan
    right_peak = peak_precision == work_precision and 0 < share <= 1
    return Figure(what, f"{fmt(achieved_flops_per_s, 'FLOP/s')} = {share * 100:.1f} % of the {peak_precision} peak",
                  f"{fmt(reference_flops_per_s, 'FLOP/s')} (analytic FLOPs / CUDA events), work in {work_precision}",
                  rate.agreement + ("" if right_peak else "; wrong peak for the work's precision"),
                  bool(rate.holds and right_peak))


def trapezoid_joules(times_s: Sequence[float], watts: Sequence[float]) -> float:
    """Energy of power readings integrated over their times (trapezoids).

    Example
    -------
    >>> trapezoid_joules([0.0, 0.5, 1.0], [100.0, 200.0, 200.0])
    175.0
    """
    return sum((t1 - t0) * (w0 + w1) / 2 for t0, t1, w0, w1 in zip(times_s, times_s[1:], watts, watts[1:]))


def queue_delays(service_s: Sequence[float], streams: int, chunk_s: float) -> List[float]:
    """Delays of one first-come-first-served server fed by ``streams`` streams, stream i's chunks arriving at
    ``(i / streams + k) x chunk_s`` (spread over a chunk period, as the stream job paces them), the j-th chunk
    served in ``service_s[j % len(service_s)]`` seconds: delay = end of its service - its arrival.

    Example
    -------
    >>> [round(d, 3) for d in queue_delays([0.1], 2, 0.5)[:4]]  # two streams, 0.1 s each, 0.25 s apart: no queue
    [0.1, 0.1, 0.1, 0.1]
    >>> [round(d, 3) for d in queue_delays([0.3], 2, 0.5)[:4]]  # 0.6 s of work per 0.5 s: the queue grows
    [0.3, 0.35, 0.4, 0.45]
    """
    chunks = max(8, 4 * len(service_s))
    arrivals = sorted((k + i / streams) * chunk_s for k in range(chunks) for i in range(streams))
    free, delays = 0.0, []
    for j, arrival in enumerate(arrivals):
        free = max(free, arrival) + service_s[j % len(service_s)]
        delays.append(free - arrival)
    return delays


def simulated_streams(service_s: Sequence[float], chunk_s: float, target_s: float, max_streams: int) -> int:
    """The most streams whose p99 delay stays within ``target_s`` and whose delay does not grow (the last
    quarter's mean delay within one mean service time of the first quarter's), from :func:`queue_delays`.

    Example
    -------
    >>> simulated_streams([0.14], 0.5, 0.5, 8)  # 3 x 0.14 s fits in 0.5 s, 4 x does not
    3
    """
    best = 0
    mean = statistics.fmean(service_s)
    for n in range(1, max_streams + 1):
        delays = queue_delays(service_s, n, chunk_s)
        ordered = sorted(delays)
        p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]
        quarter = max(1, len(delays) // 4)
        growing = statistics.fmean(delays[-quarter:]) - statistics.fmean(delays[:quarter]) > mean
        if p99 > target_s or growing:
            break
        best = n
    return best


def largest_fitting(cells: Sequence[Tuple[float, int]], gb_per_audio_s: float,
                    cap_gb: float) -> Optional[Tuple[float, int]]:
    """The largest cell ``(seconds, batch size)`` whose known allocation (``gb_per_audio_s`` per second of audio in
    the batch) stays under ``cap_gb``; the largest is the one with the most audio in its batch, then the longest.

    Example
    -------
    >>> largest_fitting([(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (2, 2), (4, 2)], 0.5, 3.0)
    (4, 1)
    """
    fits = [c for c in cells if c[0] * c[1] * gb_per_audio_s < cap_gb]
    return max(fits, key=lambda c: (c[0] * c[1], c[0])) if fits else None


def record(figure: Figure) -> Figure:
    """Append the figure to ``$SBPROF_GPU_FIGURES`` (when set) as one JSON line; returns it."""
    path = os.environ.get(FIGURES_ENV)
    if path:
        source = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        data = asdict(figure) if figure.source else {**asdict(figure), "source": source}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(data) + "\n")
    return figure


def keep_report(name: str, path: os.PathLike) -> None:
    """Keep a report a job wrote (``$SBPROF_GPU_REPORTS/<name>.md``, when set): the GPU check brings them back as
    the docs' GPU excerpts."""
    folder = os.environ.get(REPORTS_ENV)
    if folder and os.path.exists(path):
        with open(path, encoding="utf-8") as src:
            text = src.read()
        with open(os.path.join(folder, f"{name}.md"), "w", encoding="utf-8") as dst:
            dst.write(text)


def check(figure: Figure) -> None:
    """Record the figure, then assert that it holds (the assertion message is its row)."""
    record(figure)
    assert figure.holds, " | ".join(figure.row())


def read_figures(path: str) -> List[Figure]:
    """The figures appended to a JSON-lines file (none when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [Figure(**json.loads(line)) for line in f if line.strip()]


def markdown(figures: Sequence[Figure], versions: Mapping[str, str]) -> str:
    """The table (``figure | sbprof | outside reference | agreement | holds?``) under the versions it ran with.

    Example
    -------
    >>> text = markdown([relative("x", 1.0, 1.0, 0.01)], {"GPU": "NVIDIA H200"})
    >>> "| x | 1 | 1 | +0.0 % (tolerance ±1 %) | yes |" in text and "GPU: NVIDIA H200" in text
    True
    """
    lines = [f"- {key}: {value}" for key, value in versions.items()] + [""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in f.row()) + " |"
              for f in figures]
    held = sum(f.holds is True for f in figures)
    failed = sum(f.holds is False for f in figures)
    lines += ["", f"{held} held, {failed} did not, {len(figures) - held - failed} not compared (n/a: the reason "
                  "is in the agreement column)."]
    return "\n".join(lines) + "\n"


def as_json(figures: Sequence[Figure], versions: Mapping[str, str]) -> Dict[str, object]:
    """The same table as JSON-ready data."""
    return {"versions": dict(versions), "columns": list(COLUMNS), "figures": [asdict(f) for f in figures]}
