"""Markdown report of a sweep: per model and setting, RTF, RTFx, busy-time and memory tables.

The layout follows SpeechBrain's published profiling tables: one table per
(device, thread count), rows are audio lengths, columns are batch sizes. A
cell measured in several fresh processes shows its median over runs with a
run-to-run interval beside the within-run spread; skipped and OOM cells show
a prediction marked ``(pred)`` when the measured cells allow a fit. On CUDA
an extra table shows host-busy and GPU-busy time, which tells a launch-bound
cell from a GPU-bound one. Every table carries its definition and unit (from
:data:`sbprof.base.stats.METRICS`) right above it. Renderers never measure nor
analyse: they format a :class:`~sbprof.analysis.sweep.SweepSummary`.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tabulate import tabulate

from sbprof.analysis.sweep import SweepModel, SweepSetting, SweepSummary
from sbprof.report.format import machine_line, plural, sig3
from sbprof.report.limits import render_limits
from sbprof.report.sweep_cells import (CPU_COST, busy_text, cpu_cost_text, grid_table, memory_text, prediction_text,
                                       rtf_text, rtfx_prediction_text, rtfx_text)
from sbprof.base.stats import METRICS


def _input_text(summary: SweepSummary) -> str:
    if summary.example_audio:
        return (f"real recording `{summary.example_audio}` (`{summary.input}`), truncated or tiled to exactly each "
                "length")
    return f"seeded white Gaussian noise (`{summary.input}`)"


def _load_text(s: SweepSetting) -> List[str]:
    lines = []
    if s.cores and s.threads > s.cores:
        lines += ["", f"**{plural(s.threads, 'thread')} on {s.cores} logical cores: oversubscribed, the threads "
                      "compete for cores.**"]
    if s.others is not None:
        o = s.others
        text = (f"Machine load: other processes kept {o.mean:.2f} cores busy on average while these cells were timed "
                f"(up to {o.max_cell:.2f} for one cell; their CPU time over the cells' wall time, from the kernel's "
                f"counters), beside the worker's {plural(s.threads, 'thread')} on {s.cores} logical cores.")
        if s.oversubscribed and s.threads <= (s.cores or 0):
            text += (f" **Oversubscribed once the load is counted: {o.cells_over} of {o.cells} cells had more "
                     "runnable threads than cores, so the worker waited for a core; read these times as upper "
                     "bounds.**")
        return lines + ["", text] + _unpredicted(s)
    return lines + _loadavg_text(s) + _unpredicted(s)


def _unpredicted(s: SweepSetting) -> List[str]:
    if not s.time_not_predicted:
        return []
    return ["", "Skipped and out-of-memory cells get no predicted time here: the measured times are upper bounds "
            "(the machine was oversubscribed), and a cost model fitted on upper bounds bounds nothing. Their memory, "
            "which load does not change, is still predicted where the measured cells allow."]


def _loadavg_text(s: SweepSetting) -> List[str]:
    if s.loads is None:
        return []
    low, high = s.loads
    on = f" on {s.cores} logical cores" if s.cores else ""
    text = (f"Machine load: the 1-minute load average read after each cell was "
            f"{low:.2f}-{high:.2f}{on}, the worker itself counting for up to {s.threads}.")
    # More runnable threads than cores: something else shared the CPU while these cells were timed.
    if s.cores and high > s.cores + 0.5:
        text += (" **Above the core count: other processes competed for the CPU, "
                 "so read these times as upper bounds.**")
    return ["", text]


def _noise_text(s: SweepSetting) -> List[str]:
    if s.noise is None:
        return []
    text = f"Noise floor: {s.noise.describe()}"
    if s.cells_cv is not None:
        # Twice the floor (and at least 1 %): beyond what the machine alone explains.
        beyond = s.cells_cv > max(2 * s.noise.run_cv, 0.01)
        text += (f" The cells themselves varied by {100 * s.cells_cv:.1f} % between runs (median over cells, "
                 "outlying runs left out): " + ("more than the floor explains." if beyond else "what the floor explains."))
    return ["", text]


def _repeats_text(s: SweepSetting) -> List[str]:
    """The repeats line of a setting, naming the cells that did not reach the precision target."""
    counts = s.run_counts
    if not counts or (counts[-1] == 1 and s.target is None):
        return []
    text = (f"Runs: each cell was measured in {counts[0]}-{counts[-1]} fresh worker processes, interleaved over "
            "cells and settings" if len(counts) > 1 else
            f"Runs: each cell was measured in {plural(counts[0], 'fresh worker process', 'fresh worker processes')}, "
            "interleaved over cells and settings")
    if s.target is not None:
        text += (f"; adaptive repeats stopped a cell once its interval was within +-{100 * s.target:g} % of its median "
                 f"or at {s.max_runs} runs: {s.measured_cells - len(s.missed)} of {s.measured_cells} cells met the "
                 "target (`*` marks the others).")
        if s.judged_on_cpu:
            text += (f" Precision judged on CPU time for {plural(s.judged_on_cpu, 'cell')}: load {s.judged_load:.1f} "
                     "beside the run (other processes' load explained their wall-time spread).")
        if s.missed:
            text += (" Cells that did not reach the precision target (the cap of runs, or a run stopped by its time "
                     "budget; run again to resume): " + ", ".join(f"{a:g} s x {b}" for a, b in s.missed) + ".")
    else:
        text += " (fixed repeats)."
    return ["", text]


def _rtf_definition(s: SweepSetting, n_measured: int) -> str:
    base = (f"RTF = {METRICS['rtf'].definition}. Processing time is the {METRICS['wall_s'].definition}. ")
    if not s.levels:
        return base + f"Each cell: median [first quartile, third quartile] over the {n_measured} measured batches."
    return base + (
        "Each cell: median over runs [interval] +-within-run spread (runs). The median over runs is the median of "
        "each run's median batch. The interval is where the typical value lies, the median that many more runs on "
        f"this machine would give, at {', '.join(f'{c} %' for c in s.levels)}: Student's t on the logarithms of the "
        "run medians, their spread moderated toward the pooled spread of this setting's cells (4 runs pin a "
        "spread poorly); from 5 runs, a run more than 4.5 MADs from the others is an outlier, left out of the spread "
        "and counted in the parentheses (results.json's `summary` names it, and keeps the order-statistics interval "
        "for the median beside). The +-% is half the median within-run interquartile range, what one run's "
        "batches alone would suggest.")


def _cpu_cost_lines(model: SweepModel, s: SweepSetting, sub: str) -> List[str]:
    """The CPU-cost table of a CPU setting (none on CUDA, where wall time with synchronisation is the figure)."""
    if s.on_cuda or s.cpu_cost_median is None:
        return []
    load = f" (others' load beside it: {s.others.mean:.2f} cores)" if s.others is not None else ""
    return ["", f"{sub} CPU cost (core-seconds per audio second)", "",
            f"{CPU_COST}. Each cell as in the RTF table, on each call's CPU time instead of its wall time; the "
            f"wall time and RTF above stay the figures a user waits for{load}. `(judged)`: adaptive repeats "
            "judged this cell's precision on CPU time. Median over cells: "
            f"{sig3(s.cpu_cost_median)} core-seconds per audio second = {sig3(s.cpu_cost_median)} core-hours per "
            "hour of audio (the same ratio).",
            "", grid_table(s.cells, model.audio_secs, model.batch_sizes, cpu_cost_text)]


def _setting_section(model: SweepModel, s: SweepSetting, n_measured: int, heading: str) -> List[str]:
    audio_secs, batch_sizes = model.audio_secs, model.batch_sizes
    lines = ["", f"{heading} {s.device}, {plural(s.threads, 'thread')}"]
    lines += _load_text(s)
    lines += _noise_text(s)
    lines += _repeats_text(s)
    sub = heading + "#"
    lines += ["", f"{sub} Real-time factor (RTF)", "", _rtf_definition(s, n_measured),
              "", grid_table(s.cells, audio_secs, batch_sizes, rtf_text, prediction_text("rtf", ""))]
    if s.on_cuda:
        lines += ["", f"{sub} Host busy / GPU busy", "",
                  f"From one extra profiled batch per cell (run in a separate process after the timed ones): "
                  f"host busy = {METRICS['host_busy_rtf'].definition}; "
                  f"GPU busy = {METRICS['gpu_busy_rtf'].definition}; `of` = that batch's wall time / audio "
                  "seconds (it includes the profiler's own cost, about 1 us per operator). Host busy close to "
                  "the wall time and GPU busy well below it: launch-bound (the GPU waits for the host); GPU "
                  "busy close to the wall time: GPU-bound.",
                  "", grid_table(s.cells, audio_secs, batch_sizes, busy_text)]
    lines += _cpu_cost_lines(model, s, sub)
    lines += ["", f"{sub} RTFx", "",
              f"RTFx = {METRICS['rtfx'].definition}, from the median batch time (= 1 / median RTF).",
              "", grid_table(s.cells, audio_secs, batch_sizes, rtfx_text, rtfx_prediction_text)]
    added = METRICS["peak_cuda_delta_bytes" if s.on_cuda else "peak_rss_delta_bytes"]
    lines += ["", f"{sub} Memory one batch adds ({added.unit})", "",
              f"{added.unit} (10^9 bytes) = {added.definition}. Measured on one extra batch after the timed "
              "ones, so it does not depend on which cells ran before (median over runs).",
              "", grid_table(s.cells, audio_secs, batch_sizes, memory_text("added", added.unit),
                             prediction_text("batch_memory_bytes", added.unit))]
    peak = METRICS["peak_cuda_bytes" if s.on_cuda else "peak_rss_bytes"]
    lines += ["", f"{sub} Peak memory ({peak.unit})", "",
              f"Peak memory in {peak.unit} (10^9 bytes) = {peak.definition}.",
              "", grid_table(s.cells, audio_secs, batch_sizes, memory_text("peak", peak.unit),
                             prediction_text("peak_memory_bytes", peak.unit))]
    if s.formula is not None:
        lines += ["", "Cells marked `(pred)` were not measured (skipped, or out of memory): they are predicted, per "
                      "figure, by a cost model fitted on this setting's measured cells, time or memory = "
                      f"k0 + kL L + k1 B L + k2 B L^2 (B utterances of L seconds: per-call, per-decoding-step, "
                      f"per-frame and attention costs; e.g. time: {s.formula}), weighted in "
                      "relative error, with a 95 % prediction interval in brackets, calibrated on held-out cells: "
                      "each measured cell predicted without itself, and from the cells smaller than it, the errors "
                      "scaled by how far each prediction reached beyond its data (1 + log2 of the ratio of B L). A "
                      "cell further out than twice the furthest such check, or whose working set passes the "
                      "last-level cache when no measured cell's did (CPU time), shows `beyond the measured range: "
                      ">= X`, where X is the largest measured cell with no more and no longer utterances: a bound, "
                      "not a prediction. results.json keeps them in its `summary` block, apart from the measured "
                      "records."]
    return lines + _held_out_lines(s, heading)


def _held_out_lines(s: SweepSetting, heading: str) -> List[str]:
    if not s.held_out:
        return []
    table = []
    for figure, name in (("time_s", "batch time"), ("batch_memory_bytes", "memory a batch adds"),
                         ("peak_memory_bytes", "peak memory")):
        if figure in s.held_out:
            r = s.held_out[figure]
            errors = ", ".join("bound" if c.rel_error is None else f"{100 * c.rel_error:+.1f} %" for c in r.cells)
            median = r.median_abs_rel_error
            table.append([name, "n/a" if median is None else f"{100 * median:.1f} %", errors,
                          f"{s.held_out_inside[figure]} of {len(r.cells)}"])
    return ["", f"{heading}# Held-out validation of the predictions", "",
            "The whole grid was measured, so the cost model was also fitted on the triangle cells alone "
            "(SpeechBrain's rule) to predict the corner, and compared with what was measured there: relative "
            "error = predicted / measured - 1 (`bound`: beyond the measured range, only a lower bound, which "
            "holds when the measured value is at least that).", "",
            tabulate(table, headers=["figure", "median abs. error", "error per corner cell",
                                     "inside 95 % interval or above bound"],
                     tablefmt="github", disable_numparse=True)]


def render_markdown(summary: SweepSummary, title: str = "sbprof profiling report",
                    plots: Optional[Dict[str, str]] = None) -> str:
    """The whole report as markdown text.

    Arguments
    ---------
    summary : SweepSummary
        A sweep's results, analysed (:func:`sbprof.analysis.sweep.analyse`).
    title : str
        First heading.
    plots : dict, optional
        Model name (``model`` or ``model (variant)``) -> path of its plot,
        relative to the report, embedded above that model's tables.

    Returns
    -------
    str
    """
    if not summary.rows:
        return f"# {title}\n\nNo cells recorded yet.\n"
    lines = [f"# {title}", ""]
    for model in summary.models:
        method = f", method `{model.method}`" if model.method else ""
        lines.append(f"- **Model**: `{model.name}` through `{model.interface}`{method}")
    counts = summary.counts
    lines += [
        f"- **Input**: {_input_text(summary)}",
        f"- **Schedule**: {plural(summary.warmup, 'warm-up batch', 'warm-up batches')}, "
        f"then {plural(summary.measured, 'measured batch', 'measured batches')} per cell"
        + (f" (more while they add up to under {summary.measured_min_s:g} s)" if summary.measured_min_s else "")
        + ", then one batch for memory; each (device, threads) setting runs in a fresh worker process"
        + (", warmed up before its first cell" if summary.process_warmup else ""),
        f"- **Machine**: {machine_line(summary.machine)}",
        f"- **Cells**: {counts['ok']} measured, {counts['skipped']} skipped, "
        f"{counts['oom']} out of memory, {counts['error']} failed",
        "",
        "Cells show `skipped` when pruned by the triangle rule, `OOM` when the batch ran out of memory, "
        "`error: ...` when it raised (the full message is in results.json), `not measured` when no result exists yet.",
    ]
    several = len(summary.models) > 1
    heading = "###" if several else "##"
    for model in summary.models:
        if several:
            lines += ["", f"## {model.name}"]
        if plots and model.name in plots:
            lines += ["", f"![RTF and memory versus audio length, {model.name}]({plots[model.name]})", "",
                      "The plot: median RTF (left; the band is the interval the RTF table prints: the typical "
                      "value's for cells measured in several runs, the batch quartiles for a cell measured once) and memory one "
                      "batch adds (right) versus seconds of audio per utterance, one line per batch size and "
                      "setting; measured cells only."]
        for setting in model.settings:
            lines += _setting_section(model, setting, summary.measured, heading)
    lines += ["", render_limits(summary.limits)]
    return "\n".join(lines) + "\n"
