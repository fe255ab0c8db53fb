"""The sweep's plot: a line per setting and batch size, and a band that is the interval its table prints."""
from __future__ import annotations

import io

import numpy as np
from matplotlib.image import imread

from sbprof.analysis.sweep import analyse
from sbprof.record import Cell, Measurement, MemoryPeak, Results
from sbprof.report.sweep_plot import render_sweep_plots, sweep_figure


def data_lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def sweep_results():
    records = []
    for threads in (1, 2):
        for batch in (1, 4):
            for audio in (1.0, 2.0, 8.0):
                status = "skipped" if (batch, audio) == (4, 8.0) else "ok"
                wall = [0.01 * audio * batch / threads] * 3 if status == "ok" else []
                records.append(Measurement(
                    label="c", status=status, cell=Cell(model="encoder_asr", threads=threads, audio_s=audio,
                                                        batch_size=batch),
                    wall_s=wall, cpu_s=wall, audio_seconds=audio * batch,
                    memory=MemoryPeak(peak_rss_delta_bytes=int(1e6 * audio * batch)) if status == "ok" else None))
    return Results("profile", records=records)


def test_sweep_figure_has_a_line_per_setting_and_batch_size_without_skipped_cells():
    figure = sweep_figure(analyse(sweep_results()).models[0], "t")
    rtf_ax, mem_ax = figure.axes
    lines = data_lines(rtf_ax)
    assert set(lines) == {"cpu 1t, batch 1", "cpu 1t, batch 4", "cpu 2t, batch 1", "cpu 2t, batch 4"}
    assert list(lines["cpu 2t, batch 4"].get_xdata()) == [1.0, 2.0]  # 8 s x 4 was skipped
    assert np.allclose(lines["cpu 2t, batch 1"].get_ydata(), [0.005] * 3)  # RTF = 0.01 / 2 threads
    assert np.allclose(data_lines(mem_ax)["cpu 1t, batch 4"].get_ydata(), [4.0, 8.0])  # MB
    assert rtf_ax.get_xlabel() == "seconds of audio per utterance" and mem_ax.get_ylabel().startswith("memory")


def test_render_sweep_plots_gives_one_png_per_model():
    plots = render_sweep_plots(analyse(sweep_results()))
    assert list(plots) == ["encoder_asr"] and plots["encoder_asr"][0] == "plots/sweep-encoder_asr.png"
    image = imread(io.BytesIO(plots["encoder_asr"][1]), format="png")
    assert image.shape[:2] == (520, 1500)  # two panels, 4 lines: 2 legend rows
    skipped = Results("profile", records=[Measurement(label="c", status="skipped")])
    assert render_sweep_plots(analyse(skipped)) == {}


def test_the_band_is_the_interval_the_table_prints():
    """Cells measured in 3 runs: the band's edges are each cell's run-to-run interval, not the batch quartiles."""
    records = [Measurement(label="c", cell=Cell(model="m", audio_s=a, batch_size=1, run=r),
                           wall_s=[0.01 * a * f * (1 + 0.1 * r) for f in (0.9, 1.0, 1.1)], cpu_s=[0.1],
                           audio_seconds=a) for a in (1.0, 2.0) for r in range(3)]
    model = analyse(Results("profile", records=records)).models[0]
    rtf_ax = sweep_figure(model, "t").axes[0]
    (band,) = rtf_ax.collections
    edges = band.get_paths()[0].vertices[:, 1]
    for a in (1.0, 2.0):
        interval = model.settings[0].cells[(a, 1)].over_runs.interval
        assert np.isclose(edges, interval.low).any() and np.isclose(edges, interval.high).any()
        assert not np.isclose(edges, 0.009).any()  # not the first run's lower batch quartile
