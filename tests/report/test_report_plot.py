"""Plots: the figure holds the lines, scales and labels it claims; the PNG written is that figure, not blank."""
from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from sbprof.analysis.series import build_series, find_crossovers
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.record import Results
from sbprof.report.plot import Line, axis_scale, growth_label, latency_figure, render_series_plots

SIZES = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def record(variant, n, run, seconds, added):
    return Measurement(label="p", cell=Cell(model="m", variant=variant, audio_s=n, batch_size=1, run=run),
                       wall_s=[seconds * (1 + 0.01 * run)], cpu_s=[seconds], audio_seconds=n,
                       memory=MemoryPeak(peak_rss_delta_bytes=added))


def two_variants(runs=1):
    records = ([record("lin", n, r, 0.05 + 0.01 * n, int(2e6 * n)) for n in SIZES for r in range(runs)]
               + [record("pow", n, r, 0.003 * n ** 1.5, int(1e6 * n)) for n in SIZES for r in range(runs)])
    return Results("compare-models", rules={"vary": "audio_s"},
                   models={"lin": {}, "pow": {}}, machine={"cpu": "CPU", "cpu_count": 2}, records=records)


def data_lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_axis_scale_is_log_only_for_positive_values_spanning_eight_times():
    assert axis_scale([1, 8]) == "log" and axis_scale([1, 7.9]) == "linear"
    assert axis_scale([0, 1, 100]) == "linear" and axis_scale([]) == "linear"


def test_latency_figure_draws_each_variant_its_fit_its_band_and_the_crossing():
    series = build_series(two_variants())
    figure = latency_figure([Line(s.variant, s, f"C{i}") for i, s in enumerate(series)], "audio_s",
                            find_crossovers(series))
    ax, = figure.axes
    lines = data_lines(ax)
    assert set(lines) == {"lin", "pow", "lin fit (linear): t = 0.05 + 0.01*n s", "pow fit (power): t = 0.003 * n^1.5 s"}
    assert list(lines["pow"].get_xdata()) == SIZES
    assert np.allclose(lines["pow"].get_ydata(), [3.0 * n ** 1.5 for n in SIZES])  # ms
    assert np.allclose(lines["lin fit (linear): t = 0.05 + 0.01*n s"].get_ydata()[[0, -1]], [60.0, 370.0])
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")  # 32x in size, ~200x in latency
    assert ax.get_xlabel() == "seconds of audio per utterance" and ax.get_ylabel().startswith("latency per call (ms)")
    assert len(ax.collections) == 2  # one quartile band per variant
    crossing, = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert crossing.get_xdata()[0] == pytest.approx(find_crossovers(series)[0].at)


def test_several_runs_add_error_bars_from_the_run_medians():
    series = build_series(two_variants(runs=3))
    ax, = latency_figure([Line(s.variant, s, "C0") for s in series[:1]], "audio_s").axes
    assert len(ax.containers) == 1  # errorbar container: smallest to largest run median


def test_rendered_png_is_the_size_asked_and_shows_each_variants_colour():
    series = build_series(two_variants())
    lines = [Line(growth_label(s), s, f"C{i}") for i, s in enumerate(series)]
    plots = render_series_plots(lines, "audio_s", find_crossovers(series), "box: cpu, 1 thread")
    assert {name: path for name, (path, _) in plots.items()} == {"latency": "plots/latency.png",
                                                                 "memory": "plots/memory.png"}
    image = imread(io.BytesIO(plots["latency"][1]), format="png")[:, :, :3]
    assert image.shape == (520, 750, 3)  # 7.5 x (4.8 + 2 legend rows of 0.2) inches at 100 dpi
    assert (image < 0.95).any(axis=2).mean() > 0.02  # not blank
    for colour in ("C0", "C1"):
        close = np.abs(image - np.array(to_rgb(colour))).max(axis=2) < 0.05
        assert close.sum() > 200, colour  # each variant's line and markers are drawn in its colour
