"""The plot of ``sbprof run --vary``: the bars are the analysed medians, the error bars their intervals, and
report.md links the PNG written beside it."""
from __future__ import annotations

from sbprof.analysis.intervals import interval_over_runs
from sbprof.analysis.vary import Figure, VariantResult, VaryReport
from sbprof.analysis.verdict import compare_runs
from sbprof.report.vary import render
from sbprof.report.vary_plot import VARY_PLOT, vary_figure

BASE = [1.0, 1.1, 0.9, 1.0]


def _variant(name, runs, loss_ok=True):
    ratio = None if runs is BASE else compare_runs([[b] for b in BASE], [[v] for v in runs], threshold=0.0)
    return VariantResult(name, [], len(runs), loss_ok=loss_ok,
                         figures={"audio_per_s": Figure("audio_per_s", interval_over_runs(runs), ratio)})


def _report():
    variants = [_variant("base", BASE), _variant("num_workers 2", [2.0, 2.2, 1.8, 2.1]),
                _variant("precision fp16", [1.5, 1.4, 1.6, 1.5], loss_ok=False)]
    return VaryReport("train.py", "train", "audio_per_s", 4, 0.02, variants, winner="num_workers 2")


def test_the_bars_are_the_medians_and_the_error_bars_the_intervals():
    report = _report()
    ax = vary_figure(report).axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [v.figures["audio_per_s"].over_runs.median for v in report.variants]
    bars = next(c for c in ax.containers if hasattr(c, "patches"))
    segments = bars.errorbar.lines[2][0].get_segments()
    assert [(s[0][1], s[1][1]) for s in segments] == [
        (v.figures["audio_per_s"].over_runs.low, v.figures["audio_per_s"].over_runs.high) for v in report.variants]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["base (base)", "num_workers 2 (winner)", "precision fp16 (loss changed)"]
    assert ax.get_ylabel() == "audio seconds per second"


def test_report_md_links_the_png():
    files = render(_report())
    assert files[VARY_PLOT][:4] == b"\x89PNG"
    assert f"![Throughput per variant, median over runs with its interval]({VARY_PLOT})" in files["report.md"]
