"""Reports of a transducer benchmark: the study's summary table per batching mode, and CSV (format a summary).

They format a :class:`~sbprof.analysis.transducer.TransducerSummary`: ranked
backends (measured and agreeing with the reference) first, the others below
with the reason (disagrees, not checked, error, not installed with its
install hint). One table per batching mode, device and thread count.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, Optional

from sbprof.analysis.transducer import Agreement, BackendRow, ModeTable, SearchRow, Shapes, TransducerSummary
from sbprof.report.limits import render_limits

US = 1e6
"""Microseconds per second."""
REPORT_FILE = "report.md"
CSV_FILE = "results.csv"
MODE_TITLES = {"fixed": "fixed batch size, random order", "max_frames": "sorted by duration, max frames per batch"}

DEFINITIONS = """\
- **average step time**: mean wall-clock time of one training step over the
  measured steps (µs; over every run's, with several runs): the joiner on the lattice, the loss, and the backward
  pass through both; device synchronised before and after; the random
  inputs are made before the clock starts. Each step takes the next batch,
  so the spread also reflects the batches' shapes.
- **median [q1, q3]**: median and quartiles of the same step times (µs).
- **CPU per step [interval]**: what a CPU costs to run this step, independent of waiting for a core: the
  process's CPU time (user + system, all its threads) during one measured step, mean with a ~95 % interval
  (mean +- 1.96 standard errors), in core-µs; on CPU devices only. Per step, not per second of audio: the
  benchmark runs a loss on shapes, with no audio behind them. With several threads it includes threads that
  spin while waiting (OpenMP), so it can exceed the wall time x 1 core.
- **peak memory**: what the active steps add (MB = 10^6 bytes): on CUDA the
  caching allocator's peak minus its allocation before them; on CPU the
  process's resident high-water mark minus its resident size before them,
  with freed heap returned to the system (malloc_trim) and the mark reset
  just before the first active step.
- **agreement**: worst per-utterance loss difference (relative) and worst
  gradient difference (absolute) against the plain-PyTorch reference on
  small random batches; only agreeing backends are ranked.
- **python / torch**: the interpreter the backend ran in. The step includes
  the joiner, whose cost depends on the torch version: rows under different
  torch versions differ by more than their loss."""


def _agreement_text(agreement: Optional[Agreement]) -> str:
    if agreement is None:
        return "not checked"
    if agreement.ok:
        diffs = (agreement.max_loss_rel_diff, agreement.max_grad_abs_diff)
        # A hand-edited file may say ok without its differences: say ok, never a traceback.
        return "ok" if None in diffs else f"ok ({diffs[0]:.0e} / {diffs[1]:.0e})"
    return "DISAGREES: " + agreement.message[:60]


def _runtime(row: BackendRow) -> str:
    return f"{row.python} / {row.torch}" if row.python and row.torch else ""


def _cpu(row: BackendRow) -> str:
    if row.cpu_step_s is None:
        return "n/a (GPU)" if row.cell.device != "cpu" else "n/a"
    mean, low, high = (x * US for x in row.cpu_step_s)
    return f"{mean:,.0f} [{low:,.0f}, {high:,.0f}]"


def _row(row: BackendRow) -> List[str]:
    agreement = _agreement_text(row.payload.agreement)
    if row.steps is not None:
        s = row.steps
        note = "" if row.ranked else "not ranked"
        runs = f" ({row.runs} runs)" if row.runs > 1 else ""
        return [row.label, f"{s.mean * US:,.0f}{runs}", f"{s.median * US:,.0f} [{s.q1 * US:,.0f}, {s.q3 * US:,.0f}]",
                _cpu(row), "n/a" if row.peak_mb is None else f"{row.peak_mb:,.0f}", agreement, _runtime(row), note]
    note = row.outcome.message.replace("|", "/")
    if row.payload.not_installed:
        note = f"{note}; install: {row.payload.install_hint}"
    status = {"skipped": "skipped", "oom": "OOM", "error": "error"}.get(row.outcome.status, row.outcome.status)
    return [row.label, status, "", "", "", agreement, _runtime(row), note]


def _header(summary: TransducerSummary) -> List[str]:
    rules = summary.rules
    out: List[str] = []
    if rules is not None:
        shapes = rules.shapes or Shapes()
        out += [f"V = {rules.vocab_size}, joiner dim {rules.joiner_dim}, shapes "
                f"`{shapes.source}` scaled 1/{shapes.scale}; {rules.warmup} unmeasured "
                f"steps, then {rules.measured} measured ones.", ""]
    if summary.loads is not None:
        low, high, busy = summary.loads
        verdict = (f"above the worker's thread count after {', '.join(busy)}: other processes "
                   "competed for the CPU there" if busy else "never above the worker's thread count")
        out += [f"Machine load (1-minute load average after each measured schedule): {low:.2f} to "
                f"{high:.2f}; {verdict}.", ""]
    return out


def _search_table(searches: List[SearchRow]) -> List[str]:
    out = ["## Largest batch under the memory budget", "",
           "| backend | device | searched | budget (MB) | largest that fits | probes (value: peak MB) |",
           "|---|---|---|---|---|---|"]
    for row in searches:
        found, outcome = row.payload, row.outcome
        probes = ", ".join(f"{v}: {'OOM' if p is None else f'{p:,.0f}'}" for v, p in row.probes_mb)
        largest = found.largest if outcome.ok else f"{outcome.status}: {outcome.message}"
        out.append(f"| {row.label} | {row.device} | {row.searched} "
                   f"| {'device OOM' if row.budget_mb is None else f'{row.budget_mb:,.0f}'} "
                   f"| {largest}{' (limit)' if found.capped else ''} | {probes} |")
    return out + [""]


def _table(table: ModeTable) -> List[str]:
    header = ["backend", "average step time (µs)", "median [q1, q3] (µs)", "CPU per step [interval] (core-µs)",
              "peak memory (MB)", "agreement",
              "python / torch", "note"]
    out = [f"## {MODE_TITLES.get(table.mode, table.mode)} ({'batch size' if table.mode == 'fixed' else 'max frames'} "
           f"{table.size}); `{table.device}`, {table.threads} thread(s)", ""]
    padding = table.padding
    if padding:
        out += [f"Measured steps: {padding.utterances} utterances in {padding.batches} batches; padding "
                f"{padding.frame_padding:.1%} of frames, {padding.lattice_padding:.1%} of lattice cells.", ""]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join("---" for _ in header) + "|")
    out += ["| " + " | ".join(_row(row)) + " |" for row in table.rows]
    return out + [""]


def render_markdown(summary: TransducerSummary) -> str:
    """The study's summary table per batching mode (and device, threads), the search results and definitions.

    Example
    -------
    >>> from sbprof.analysis.transducer import analyse
    >>> from sbprof.record import Cell, Measurement, Results
    >>> m = Measurement("quick", cell=Cell(model="quick", batch_size=4, params={"mode": "fixed"}),
    ...                 wall_s=[0.001, 0.003], extra={"agreement": {"ok": True, "max_loss_rel_diff": 1e-7,
    ...                                                             "max_grad_abs_diff": 1e-5}})
    >>> "| quick | 2,000 |" in render_markdown(analyse(Results("transducer", records=[m])))
    True
    """
    out = ["# Transducer-loss benchmark", ""] + _header(summary)
    for table in summary.tables:
        out += _table(table)
    if summary.searches:
        out += _search_table(summary.searches)
    out += ["Definitions:", "", DEFINITIONS, "", render_limits(summary.limits), ""]
    return "\n".join(out)


CSV_FIELDS = ("backend", "mode", "batch_size", "max_frames", "device", "threads", "status", "runs", "mean_step_us",
              "median_step_us", "q1_step_us", "q3_step_us", "cpu_step_us", "cpu_step_low_us", "cpu_step_high_us",
              "steps", "peak_mb", "agreement_ok", "max_loss_rel_diff", "max_grad_abs_diff", "python", "torch",
              "message")


def render_csv(summary: TransducerSummary) -> str:
    """One row per cell (runs pooled; ``results.json`` keeps every run's raw samples)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in summary.rows:
        agreement = r.payload.agreement
        row: Dict[str, Any] = {"backend": r.label, "mode": r.mode, "batch_size": r.cell.batch_size,
                               "max_frames": r.max_frames, "device": r.cell.device,
                               "threads": r.cell.threads, "status": r.outcome.status, "runs": r.runs,
                               "message": r.outcome.message,
                               "agreement_ok": agreement and agreement.ok, "steps": r.steps.count if r.steps else 0,
                               "max_loss_rel_diff": agreement and agreement.max_loss_rel_diff,
                               "max_grad_abs_diff": agreement and agreement.max_grad_abs_diff, "peak_mb": r.peak_mb,
                               "python": r.python, "torch": r.torch}
        if r.steps is not None:
            s = r.steps
            row.update(mean_step_us=s.mean * US, median_step_us=s.median * US, q1_step_us=s.q1 * US,
                       q3_step_us=s.q3 * US)
        if r.cpu_step_s is not None:
            row.update(zip(("cpu_step_us", "cpu_step_low_us", "cpu_step_high_us"), (x * US for x in r.cpu_step_s)))
        writer.writerow(row)
    return buf.getvalue()


def render(summary: TransducerSummary) -> Dict[str, str]:
    """``report.md`` and ``results.csv``, by file name."""
    return {REPORT_FILE: render_markdown(summary), CSV_FILE: render_csv(summary)}
