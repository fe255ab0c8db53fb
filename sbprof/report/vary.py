"""The report of ``sbprof run --vary``: the answer in one line, the variants ranked, each figure with its interval
and its ratio to the base, the loss check, the failures, and what limits each variant.

Renders a :class:`~sbprof.analysis.vary.VaryReport` (computed before); nothing is measured or computed here.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

from tabulate import tabulate

from sbprof.analysis.vary import FIGURES, Figure, VariantResult, VaryReport
from sbprof.report.format import sig3

NO_CHANGE = "no change the runs can show"
NOT_COMPARED = "loss not compared (its own arguments give it other batches)"


def _ratio(f: Optional[Figure]) -> str:
    if f is None or f.ratio is None:
        return f"n/a ({f.no_ratio})" if f is not None and f.no_ratio else ""
    r = f.ratio
    text = f"{r.ratio:.2f}x [{r.low:.2f}, {r.high:.2f}]"
    return f"{text}: {NO_CHANGE}" if f.no_change else text


def _value(f: Optional[Figure], share: bool = False) -> str:
    if f is None:
        return "n/a"
    iv = f.over_runs
    if share:
        return f"{100 * iv.median:.1f} % [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"
    return f"{sig3(iv.median)} [{sig3(iv.low)}, {sig3(iv.high)}]"


def _loss(report: VaryReport, v: VariantResult) -> str:
    if v is report.variants[0]:
        return "(base)"
    if not v.loss_compared:
        return NOT_COMPARED if v.measured else ""
    if v.loss_change is None:
        return "no loss to compare" if v.measured else ""
    within = f"{100 * v.loss_change:.2g} % over {v.loss_steps} steps" if v.loss_change != float("inf") \
        else "not finite"
    return within if v.loss_ok else f"**changed** ({within}; tolerance {100 * report.loss_tolerance:g} %)"


def _memory_change(v: VariantResult) -> str:
    f = v.figures.get("peak_gb")
    if f is None or f.ratio is None:
        return ""
    return f", peak memory {100 * (f.ratio.ratio - 1):+.0f} %"


def answer(report: VaryReport) -> str:
    """The one line: the fastest variant that keeps the loss, with its ratio, loss and memory; or why none."""
    noun = FIGURES[report.throughput][0]
    if report.winner is None:
        return (f"No variant that keeps the loss is faster than the base by a change the runs can show "
                f"({noun}).")
    v = next(x for x in report.variants if x.name == report.winner)
    f = v.figures[report.throughput]
    loss = (f"loss within {100 * v.loss_change:.2g} %" if v.loss_change is not None
            else NOT_COMPARED if not v.loss_compared else "no loss to compare")
    return (f"**{v.name}**: {f.ratio.ratio:.2f}x [{f.ratio.low:.2f}, {f.ratio.high:.2f}] the base's {noun}, "
            f"{loss}{_memory_change(v)}.")


def table(report: VaryReport) -> str:
    """Each variant (base first), its throughput, ratio, step time, data-wait share, peak memory, CPU cost, loss."""
    rows = []
    for v in report.variants:
        if not v.measured:
            rows.append([v.name, "failed"] + [""] * 8)
            continue
        t = v.figures.get(report.throughput)
        rows.append([v.name, v.runs, _value(t), "(base)" if v is report.variants[0] else _ratio(t),
                     _value(v.figures.get("step_s")), _value(v.figures.get("wait_share"), share=True),
                     _value(v.figures.get("peak_gb")), _value(v.figures.get("cpu_cost")),
                     _value(v.figures.get("workers_cpu_share"), share=True), _loss(report, v)])
    headers = ["variant", "runs", FIGURES[report.throughput][0], "ratio to the base", "step time (s)",
               "data wait", "peak memory (GB)", "CPU cost", "of it, workers'", "loss vs the base"]
    return tabulate(rows, headers=headers, tablefmt="github")


def ratios(report: VaryReport) -> str:
    """Every figure's ratio to the base, per variant."""
    keys = [k for k in FIGURES if any(k in v.figures for v in report.variants)]
    rows = [[v.name] + [_ratio(v.figures.get(k)) for k in keys] for v in report.variants[1:] if v.measured]
    return tabulate(rows, headers=["variant"] + [FIGURES[k][0] for k in keys], tablefmt="github")


def render_vary(report: VaryReport, plot: Optional[str] = None) -> str:
    lines: List[str] = [f"# sbprof run --vary: {report.script}", "", answer(report), ""]
    if plot:
        lines += [f"![Throughput per variant, median over runs with its interval]({plot})", ""]
    if report.ranking:
        lines += ["Ranked (variants that keep the loss, fastest first): " + "; ".join(report.ranking) + ".", ""]
    flagged = [v.name for v in report.variants if v.measured and not v.loss_ok]
    if flagged:
        lines += [f"Loss changed beyond {100 * report.loss_tolerance:g} %, never ranked: {', '.join(flagged)}.", ""]
    why = [(v.name, v.suggested_by) for v in report.variants if v.suggested_by]
    if why:
        lines += ["### Suggested by the base run's verdicts", ""]
        lines += [f"- **{n}**: suggested by the {w.split(':', 1)[0]} verdict ({w.split(':', 1)[1].strip()})"
                  for n, w in why] + [""]
    lines += [f"## Variants (stage `{report.stage}`)", "", table(report), "", "### Ratios to the base", "",
              ratios(report), ""]
    failed = [(v.name, f) for v in report.variants for f in v.failures]
    if failed:
        lines += ["### Failed runs", ""] + [f"- {name}, {f}" for name, f in failed] + [""]
    if report.notes:
        lines += ["### Notes", ""] + [f"- {n}" for n in report.notes] + [""]
    lines += [
        "### Definitions", "",
        f"- each run is a fresh `sbprof run` process; rounds run every variant once, in turn (A B C, A B C...), "
        f"at least {report.rounds}; more rounds (adaptive repeats) while a throughput ratio's interval is wider "
        f"than +-{100 * report.precision:g} % (its width alone decides, never its place against 1), up to the "
        "maximum or the time budget, each added round's reason in the notes",
        f"- **{FIGURES[report.throughput][0]}**: summed units of the measured steps over their loop time (data wait, "
        "time between steps and the step); **step time**: the median measured step; **data wait**: its share of the "
        "loop; **peak memory**: the memory step's peak (resident on CPU, allocator on CUDA); **CPU cost**: the CPU "
        "seconds of the measured loop (from one step's end to the next's: data wait, between and step), the "
        "process's and its DataLoader workers', per unit (audio second, utterance or step); **of it, workers'**: "
        "the workers' share of it",
        f"- a figure: the median over runs [its interval at about {100 * report.runs_confidence():.0f} % or more, "
        "distribution-free]"
        "; a ratio: variant / base, Hodges-Lehmann over runs with the exact Mann-Whitney interval (the gate's); "
        f"\"{NO_CHANGE}\" when the interval includes 1",
        f"- **loss vs the base**: the largest relative difference of the losses of the first steps (same seed, same "
        f"batches); beyond {100 * report.loss_tolerance:g} % or not finite, the variant is flagged and never named "
        "the winner", ""]
    for v in report.variants:
        if v.measured:
            from sbprof.report.limits import render_limits

            lines += [f"## {v.name}: what limits this", "", render_limits(v.limits).split("\n", 2)[2], ""]
    return "\n".join(lines)


def render(report: VaryReport) -> Dict[str, Union[str, bytes]]:
    """``{"report.md": text}`` and the throughput plot (:mod:`sbprof.report.vary_plot`)."""
    from sbprof.report.vary_plot import render_vary_plot

    plots = render_vary_plot(report)
    return {"report.md": render_vary(report, next(iter(plots), None)), **plots}
