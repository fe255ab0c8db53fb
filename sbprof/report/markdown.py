"""Markdown report of a sweep: per model and setting, RTF, RTFx, busy-time and memory tables.

The layout follows SpeechBrain's published profiling tables: one table per
(device, thread count), rows are audio lengths, columns are batch sizes. A
cell measured in several fresh processes shows its median over runs with a
run-to-run interval beside the within-run spread; skipped and OOM cells show
a prediction marked ``(pred)`` when the measured cells allow a fit. On CUDA
an extra table shows host-busy and GPU-busy time, which tells a launch-bound
cell from a GPU-bound one. Every table carries its definition and unit (from
:data:`sbprof.stats.METRICS`) right above it. Renderers never measure: they
read a :class:`~sbprof.results.Results`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from tabulate import tabulate

from sbprof.figures import setting_sort_key
from sbprof.predictions import held_out_validation, predict_cells
from sbprof.record import STATUSES, Env, Measurement
from sbprof.report.cells import (GridKey, Predicted, Runs, busy_text, grid_table, memory_text, prediction_text,
                                 rtf_text, rtfx_prediction_text, rtfx_text)
from sbprof.report.format import plural
from sbprof.results.store import Results
from sbprof.runs import group_runs, noise_floor, representative, rtf_over_runs
from sbprof.stats import METRICS

SettingKey = Tuple[str, int]


def _input_text(m: Measurement) -> str:
    name = m.settings.get("example_audio")
    if name:
        return f"real recording `{name}` (`{m.cell.input}`), truncated or tiled to exactly each length"
    return f"seeded white Gaussian noise (`{m.cell.input}`)"


def _env_text(env: Optional[Env]) -> str:
    if env is None:
        return "not recorded"
    gpu = f"{env.gpu} (CUDA {env.cuda})" if env.gpu else "none"
    return (f"torch {env.torch}, torchaudio {env.torchaudio}, speechbrain {env.speechbrain}, "
            f"Python {env.python}; CPU: {env.cpu} ({env.cpu_count} logical cores); GPU: {gpu}")


def _load_text(records: Sequence[Measurement], threads: int) -> List[str]:
    loads = [m.extra["loadavg_1m"] for m in records if "loadavg_1m" in m.extra]
    cores = next((m.env.cpu_count for m in records if m.env is not None), None)
    lines = []
    if cores and threads > cores:
        lines += ["", f"**{plural(threads, 'thread')} on {cores} logical cores: oversubscribed, the threads "
                      "compete for cores.**"]
    if not loads:
        return lines
    on = f" on {cores} logical cores" if cores else ""
    text = (f"Machine load: the 1-minute load average read after each cell was "
            f"{min(loads):.2f}-{max(loads):.2f}{on}, the worker itself counting for up to {threads}.")
    # More runnable threads than cores: something else shared the CPU while these cells were timed.
    if cores and max(loads) > cores + 0.5:
        text += (" **Above the core count: other processes competed for the CPU, "
                 "so read these times as upper bounds.**")
    return lines + ["", text]


def _repeats_text(cells: Dict[GridKey, Runs]) -> Tuple[List[str], Optional[float]]:
    """The repeats line of a setting, and the target its RTF cells are held to (``None``: fixed runs)."""
    ok = [[m for m in runs if m.ok] for runs in cells.values()]
    ok = [runs for runs in ok if runs]
    if not ok or max(len(r) for r in ok) == 1:
        return [], None
    policy = ok[0][0].settings.get("repeats", {})
    target = policy.get("target") if policy.get("runs") == "adaptive" else None
    met = sum(1 for runs in ok if target is not None and _met(runs, target, policy.get("confidence", 0.95)))
    counts = sorted({len(r) for r in ok})
    text = (f"Runs: each cell was measured in {counts[0]}-{counts[-1]} fresh worker processes, interleaved over "
            "cells and settings" if len(counts) > 1 else
            f"Runs: each cell was measured in {counts[0]} fresh worker processes, interleaved over cells and settings")
    if target is not None:
        text += (f"; adaptive repeats stopped a cell once its interval was within +-{100 * target:g} % of its median "
                 f"or at {policy.get('max_runs')} runs: {met} of {len(ok)} cells met the target (`*` marks the others).")
    else:
        text += " (fixed repeats)."
    return ["", text], target


def _met(runs: Runs, target: float, confidence: float) -> bool:
    interval = rtf_over_runs(runs).interval
    return interval.confidence >= confidence and interval.within(target)


def _rtf_definition(cells: Dict[GridKey, Runs], n_measured: int) -> str:
    base = (f"RTF = {METRICS['rtf'].definition}. Processing time is the {METRICS['wall_s'].definition}. ")
    several = any(sum(m.ok for m in runs) > 1 for runs in cells.values())
    if not several:
        return base + f"Each cell: median [first quartile, third quartile] over the {n_measured} measured batches."
    levels = sorted({round(100 * rtf_over_runs(r).interval.confidence) for r in cells.values()
                     if sum(m.ok for m in r) > 1})
    return base + (
        "Each cell: median over runs [run-to-run interval] +-within-run spread (runs). The median over runs is the "
        "median of each run's median batch; the interval is where a repeat of this sweep (as many runs) should put "
        f"that median, with the confidence stated (here {', '.join(f'{c} %' for c in levels)}: a prediction interval "
        "from the spread of the run medians, taken as log-normal, with Student's t; results.json's `summary` also keeps "
        "the narrower confidence interval for the median itself); the +-% is half the median within-run interquartile range, "
        "what one run's batches alone would suggest.")


def _setting_section(device: str, threads: int, records: Sequence[Measurement], audio_secs: Sequence[float],
                     batch_sizes: Sequence[int], n_measured: int, heading: str, predicted: Predicted,
                     held_out: List[str]) -> List[str]:
    on_cuda = device.startswith("cuda")
    cells: Dict[GridKey, Runs] = {runs[0].cell.grid_key: runs for runs in group_runs(records).values()}
    lines = ["", f"{heading} {device}, {plural(threads, 'thread')}"]
    lines += _load_text(records, threads)
    repeats, target = _repeats_text(cells)
    lines += repeats
    sub = heading + "#"
    lines += ["", f"{sub} Real-time factor (RTF)", "", _rtf_definition(cells, n_measured),
              "", grid_table(cells, audio_secs, batch_sizes, lambda runs: rtf_text(runs, target),
                             prediction_text(predicted, "time_s", ""))]
    if on_cuda:
        lines += ["", f"{sub} Host busy / GPU busy", "",
                  f"From one extra profiled batch per cell (run in a separate process after the timed ones): "
                  f"host busy = {METRICS['host_busy_rtf'].definition}; "
                  f"GPU busy = {METRICS['gpu_busy_rtf'].definition}; `of` = that batch's wall time / audio "
                  "seconds (it includes the profiler's own cost, about 1 us per operator). Host busy close to "
                  "the wall time and GPU busy well below it: launch-bound (the GPU waits for the host); GPU "
                  "busy close to the wall time: GPU-bound.",
                  "", grid_table(cells, audio_secs, batch_sizes, busy_text)]
    lines += ["", f"{sub} RTFx", "",
              f"RTFx = {METRICS['rtfx'].definition}, from the median batch time (= 1 / median RTF).",
              "", grid_table(cells, audio_secs, batch_sizes, rtfx_text, rtfx_prediction_text(predicted))]
    added = METRICS["peak_cuda_delta_bytes" if on_cuda else "peak_rss_delta_bytes"]
    lines += ["", f"{sub} Memory one batch adds ({added.unit})", "",
              f"{added.unit} (10^9 bytes) = {added.definition}. Measured on one extra batch after the timed "
              "ones, so it does not depend on which cells ran before (median over runs).",
              "", grid_table(cells, audio_secs, batch_sizes, memory_text(added.name),
                             prediction_text(predicted, "batch_memory_bytes", added.unit))]
    peak = METRICS["peak_cuda_bytes" if on_cuda else "peak_rss_bytes"]
    lines += ["", f"{sub} Peak memory ({peak.unit})", "",
              f"Peak memory in {peak.unit} (10^9 bytes) = {peak.definition}.",
              "", grid_table(cells, audio_secs, batch_sizes, memory_text(peak.name),
                             prediction_text(predicted, "peak_memory_bytes", peak.unit))]
    if any(k[1] == "time_s" for k in predicted):
        formula = next(p.formula for (_, figure), p in predicted.items() if figure == "time_s")
        lines += ["", "Cells marked `(pred)` were not measured (skipped, or out of memory): they are predicted, per "
                      "figure, by a cost model fitted on this setting's measured cells, time or memory = "
                      f"k0 + kL L + k1 B L + k2 B L^2 (B utterances of L seconds: per-call, per-decoding-step, "
                      f"per-frame and attention costs; e.g. time: {formula}), weighted in "
                      "relative error, with a 95 % prediction interval in brackets. results.json keeps them in its "
                      "`summary` block, apart from the measured records."]
    return lines + held_out


def _held_out_lines(results: Results, setting: SettingKey, heading: str) -> List[str]:
    reports = {figure: r for (s, figure), r in held_out_validation(results.records).items() if s == setting}
    if "time_s" not in reports:
        return []
    table = []
    for figure, name in (("time_s", "batch time"), ("batch_memory_bytes", "memory a batch adds"),
                         ("peak_memory_bytes", "peak memory")):
        if figure in reports:
            r = reports[figure]
            errors = ", ".join(f"{100 * c.rel_error:+.1f} %" for c in r.cells)
            inside = sum(c.inside for c in r.cells)
            table.append([name, f"{100 * r.median_abs_rel_error:.1f} %", errors,
                          f"{inside} of {len(r.cells)}"])
    return ["", f"{heading}# Held-out validation of the predictions", "",
            "The whole grid was measured, so the cost model was also fitted on the triangle cells alone "
            "(SpeechBrain's rule) to predict the corner, and compared with what was measured there: relative "
            "error = predicted / measured - 1.", "",
            tabulate(table, headers=["figure", "median abs. error", "error per corner cell", "inside 95 % interval"],
                     tablefmt="github", disable_numparse=True)]


def _noise_text(results: Results) -> List[str]:
    floor = noise_floor(results.calibration[-4:])
    return [] if floor is None else [f"- **Noise floor**: {floor.describe()}"]


def render_markdown(results: Results, title: str = "sbprof profiling report",
                    plots: Optional[Dict[str, str]] = None) -> str:
    """The whole report as markdown text.

    Arguments
    ---------
    results : Results
        A sweep's results (as stored in ``results.json``), any statuses.
    title : str
        First heading.
    plots : dict, optional
        Model name (``model`` or ``model (variant)``) -> path of its plot,
        relative to the report, embedded above that model's tables.

    Returns
    -------
    str
    """
    records = results.records
    if not records:
        return f"# {title}\n\nNo cells recorded yet.\n"
    env = next((m.env for m in records if m.env is not None), None)
    firsts = [representative(runs) for runs in group_runs(records).values()]
    counts = {s: sum(m.status == s for m in firsts) for s in STATUSES}
    models: Dict[Tuple[str, str], List[Measurement]] = {}
    for m in records:
        models.setdefault((m.cell.model, m.cell.variant or ""), []).append(m)
    lines = [f"# {title}", ""]
    for (model, variant), group in sorted(models.items()):
        first = group[0]
        method = f", method `{first.settings['method']}`" if first.settings.get("method") else ""
        name = f"{model} ({variant})" if variant else model
        lines.append(f"- **Model**: `{name}` through `{first.settings.get('interface', '?')}`{method}")
    first = records[0]
    n_measured = results.rules.get("measured_batches", len(first.wall_s))
    lines += [
        f"- **Input**: {_input_text(first)}",
        f"- **Schedule**: {plural(first.warmup, 'warm-up batch', 'warm-up batches')}, "
        f"then {plural(n_measured, 'measured batch', 'measured batches')} per cell, then one batch for memory; "
        "each (device, threads) setting runs in a fresh worker process",
        f"- **Environment**: {_env_text(env)}",
        *_noise_text(results),
        f"- **Cells**: {counts['ok']} measured, {counts['skipped']} skipped, "
        f"{counts['oom']} out of memory, {counts['error']} failed",
        "",
        "Cells show `skipped` when pruned by the triangle rule, `OOM` when the batch ran out of memory, "
        "`error: ...` when it raised (the full message is in results.json), `not measured` when no result exists yet.",
    ]
    wanted = first.settings.get("predict", {})  # what the run asked for (older files: everything)
    predictions: Dict[SettingKey, Predicted] = {}
    for p in predict_cells(records) if wanted.get("fill", True) else []:
        predictions.setdefault((p.device, p.threads), {})[((p.audio_s, p.batch_size), p.figure)] = p
    several = len(models) > 1
    for (model, variant), group in sorted(models.items()):
        heading = "###" if several else "##"
        name = f"{model} ({variant})" if variant else model
        if several:
            lines += ["", f"## {name}"]
        if plots and name in plots:
            lines += ["", f"![RTF and memory versus audio length, {name}]({plots[name]})", "",
                      "The plot: median RTF (left) and memory one batch adds (right) versus seconds of audio per "
                      "utterance, one line per batch size and setting; measured cells only."]
        audio_secs = sorted({m.cell.audio_s for m in group})
        batch_sizes = sorted({m.cell.batch_size for m in group})
        by_setting: Dict[SettingKey, List[Measurement]] = {}
        for m in group:
            by_setting.setdefault(m.cell.setting, []).append(m)
        for setting in sorted(by_setting, key=lambda k: setting_sort_key(*k)):
            lines += _setting_section(*setting, by_setting[setting], audio_secs, batch_sizes, n_measured, heading,
                                      predictions.get(setting, {}),
                                      _held_out_lines(Results(results.job, records=by_setting[setting]), setting,
                                                      heading) if wanted.get("validate", True) else [])
    return "\n".join(lines) + "\n"
