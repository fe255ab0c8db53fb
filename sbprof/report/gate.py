"""The regression gate's verdicts as a table, a summary line and notes (formats a gate report; never judges)."""
from __future__ import annotations

from sbprof.analysis.gate import GATE_METRICS, RUN_LEVEL, GateReport
from sbprof.report.format import table


def render_gate(report: GateReport) -> str:
    """The gate's verdicts as a table, a summary line and notes (plain text that is also markdown)."""
    rows = []
    for r in report.rows:
        v = r.verdict
        change = f"{v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}]" if v else "n/a"
        how = "run-level" if r.method == RUN_LEVEL else "WITHIN-RUN"
        why = [v.reason if v else "", r.note if r.note and (not v or r.method != RUN_LEVEL or r.on_cpu) else ""]
        rows.append([r.cell, r.status, change, f"{r.baseline_runs} / {r.candidate_runs}", how,
                     "; ".join(w for w in why if w)])
    lines = [f"sbprof gate: {report.metric} ({GATE_METRICS[report.metric]}), each run's {report.statistic}; "
             f"regressed = more than {100 * report.threshold:g}% worse with the {100 * report.confidence:g}% "
             "interval excluding no change",
             "", table(rows, ["cell", "verdict", "new / baseline [interval]", "runs base / new", "how", "why"]), "",
             ", ".join(f"{n} {status}" for status, n in report.verdict_counts.items())]
    on_cpu = [r for r in report.rows if r.on_cpu]
    if on_cpu:
        lines.append(f"{len(on_cpu)} cell(s) judged on CPU time (CPU time of the worker's threads / audio seconds): "
                     "other processes' load beside the runs explained their wall-time spread.")
    if any(r.method != RUN_LEVEL and r.verdict for r in report.rows):
        lines.append("WITHIN-RUN rows treat every call as a sample: between-process noise (~10% here) is unseen, "
                     "so they flag unchanged code far more often than the stated level.")
    if report.unjudged:
        instead = ("; a within-run comparison was allowed, but they hold too few calls for one too" if report.within_run
                   else ", or pass --within-run for a labelled within-run comparison")
        lines.append(f"{len(report.unjudged)} cell(s) not judged: measure at least 4 fresh-process runs a side "
                     f"(runs: 4 in a comparison){instead}.")
    if report.unmeasured:
        lines.append(f"not compared, no {report.metric} figure on both sides (a training world's record, say: its "
                     f"ranks hold the figures): {'; '.join(report.unmeasured)}")
    for title, items in (("only in the baseline", report.only_baseline), ("only in the new run", report.only_candidate),
                         ("differences between the two", report.environment_notes)):
        if items:
            lines.append(f"{title}: {'; '.join(items)}")
    return "\n".join(lines) + "\n"
