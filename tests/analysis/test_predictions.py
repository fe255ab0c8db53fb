"""Predicted cells against measured ones: fit on the triangle of a real model's full grid, predict the corner."""
from __future__ import annotations

import pytest

from helpers.fake_interfaces import use_test_environment, write_sweep_yaml
from helpers.paths import EXAMPLE_AUDIO as EXAMPLE
from sbprof.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.analysis.machine_load import crowded_settings
from sbprof.analysis.predictions import held_out_validation
from sbprof.results import load_results
from sbprof.sweep.config import load_config


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


@pytest.mark.slow
@pytest.mark.parametrize("model, interface", [("encoder_asr", "EncoderASR"),
                                              ("encoder_decoder_asr", "EncoderDecoderASR")])
def test_triangle_predicts_the_measured_corner_of_a_real_model(tmp_path, model, interface):
    """Peak memory of the corner predicted within 15 % (median relative error); every figure validated; bounds
    hold.

    Batch time and the memory one batch adds are validated and printed in the report but not held to
    15 % here, where one run per cell on a shared 2-core machine decides. Measured (README, "Predicted
    cells"): batch time 2.1-23.9 % for encoder_decoder_asr in three repeats, 3.8-28.3 % for encoder_asr in
    four (its corner passes the 32 MB last-level cache and is under-predicted in 11 of 12 cells); the memory
    a batch adds 15.3-34.4 % (glibc's reuse of freed heap makes it grow less than linearly there); peak
    memory 0.5-2.0 %.
    """
    path = write_sweep_yaml(tmp_path / "s.yaml", model, interface, example_audio=EXAMPLE, triangle_only=False,
                            lengths=[0.5, 1, 2, 4], batch_sizes=[1, 2, 4], warmup=2, measured=5,
                            output_folder=tmp_path / "out")
    folder = run_config(get_job("profile"), load_config(path, None, {"noprogressbar": True}), log=print).folder
    records = load_results(folder).records
    reports = held_out_validation(records)
    errors = {figure: r.median_abs_rel_error for (_, figure), r in reports.items()}
    # Its time too, unless other work oversubscribed the machine: then its times are upper bounds, not validated.
    crowded = bool(crowded_settings(records))
    assert set(errors) == {"batch_memory_bytes", "peak_memory_bytes"} | (set() if crowded else {"time_s"})
    assert errors["peak_memory_bytes"] <= 0.15, errors
    assert all(e is None or 0 <= e < float("inf") for e in errors.values()), errors
    # A cell beyond the measured range (e.g. its time past the last-level cache) is a bound from a measured
    # cell it dominates: the measured corner is never below it.
    assert all(c.inside for r in reports.values() for c in r.cells if c.prediction.beyond is not None)
    assert "Held-out validation of the predictions" in (folder / "report.md").read_text()


def _cell(audio_s, batch_size, status="ok", llc=32 * 2 ** 20, others=None):
    """A cell timed at 0.01 + 0.02 B L s on a 2-core machine; ``others``: the cores other processes kept busy."""
    from sbprof.record import Cell, Env, Measurement, MemoryPeak

    cell = Cell(model="m", device="cpu", threads=1, audio_s=audio_s, batch_size=batch_size, input="random:seed=0")
    if status != "ok":
        return Measurement(label="c", cell=cell, status=status)
    work = audio_s * batch_size  # time 0.01 + 0.02 B L s; a batch adds 3 MB per audio second, on 100 MB
    wall = [0.01 + 0.02 * work] * 3
    return Measurement(label="c", cell=cell, wall_s=wall, audio_seconds=work,
                       memory=MemoryPeak(peak_rss_bytes=int(1e8 + 3e6 * work), peak_rss_delta_bytes=int(3e6 * work)),
                       env=Env(cpu_count=2, llc_bytes=llc),
                       extra={} if others is None else {"others_cpu_s": others * sum(wall), "window_s": sum(wall)})


def test_an_oversubscribed_settings_time_is_not_predicted_from_its_upper_bounds_but_its_memory_is():
    """Issue 39: a fit on times measured while the machine was oversubscribed printed intervals such as RTFx ~1364
    [0.027, 68,224,460]. Those times are upper bounds: no time is predicted from them, and the report says so;
    memory, which load does not change, still is."""
    from sbprof.analysis.predictions import predict_cells
    from sbprof.analysis.sweep import analyse
    from sbprof.record.results import Results
    from sbprof.report.sweep_markdown import render_markdown

    def grid(others):
        return [_cell(a, b, llc=64 * 2 ** 20, others=others) for a in (1, 2, 4) for b in (1, 2, 4)
                if (a, b) != (4, 4)] + [_cell(4, 4, "skipped")]

    crowded, calm = grid(1.5), grid(0.2)  # 1 thread + 1.5 cores of others' load on 2 cores: oversubscribed
    assert {p.figure for p in predict_cells(crowded)} == {"batch_memory_bytes", "peak_memory_bytes"}
    assert {p.figure for p in predict_cells(calm)} == {"time_s", "batch_memory_bytes", "peak_memory_bytes"}
    summary = analyse(Results("profile", rules={"measured": 3}, records=crowded))
    setting = summary.models[0].settings[0]
    assert setting.oversubscribed and setting.time_not_predicted
    assert set(setting.cells[(4, 4)].predicted) == {"batch_memory_bytes", "peak_memory_bytes"}
    report = render_markdown(summary)
    assert "Skipped and out-of-memory cells get no predicted time here: the measured times are upper bounds" in report
    assert "RTF at 4 s x batch 4 (predicted)" not in report
    calm_summary = analyse(Results("profile", rules={"measured": 3}, records=calm))
    assert not calm_summary.models[0].settings[0].time_not_predicted
    assert calm_summary.models[0].settings[0].cells[(4, 4)].predicted["rtf"].value == pytest.approx(
        (0.01 + 0.02 * 16) / 16, rel=1e-6)


def test_time_past_the_last_level_cache_is_a_bound_when_no_measured_cell_went_there():
    """Measured batches add at most 24 MB (8 s of audio), under a 32 MiB cache; (4 s, x4) is predicted at 48 MB
    (at 2x, within twice the held-out checks' reach): its memory is predicted, its time only bounded from below,
    by the measured (4 s, x2)."""
    from sbprof.analysis.predictions import predict_cells

    records = [_cell(a, b) for a in (1, 2, 4) for b in (1, 2, 4) if (a, b) != (4, 4)] + [_cell(4, 4, "skipped")]
    by_figure = {p.figure: p for p in predict_cells(records)}
    time, memory = by_figure["time_s"], by_figure["batch_memory_bytes"]
    assert time.value is None and time.low == pytest.approx(0.01 + 0.02 * 8)
    assert time.beyond.startswith("its working set (~48 MB a batch adds, predicted) passes the 32 MiB last-level")
    assert memory.beyond is None and memory.value == pytest.approx(48e6, rel=1e-6)
    # The same cells on a machine with a larger cache (or a measured cell already past it): a number.
    roomy = [_cell(a, b, m.status, llc=64 * 2 ** 20) for m, (a, b) in
             zip(records, [(m.cell.audio_s, m.cell.batch_size) for m in records])]
    (time_roomy,) = [p for p in predict_cells(roomy) if p.figure == "time_s"]
    assert time_roomy.beyond is None and time_roomy.value == pytest.approx(0.01 + 0.02 * 16, rel=1e-6)
