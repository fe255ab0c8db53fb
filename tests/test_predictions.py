"""Predicted cells against measured ones: fit on the triangle of a real model's full grid, predict the corner."""
from __future__ import annotations

from pathlib import Path

import pytest

from fake_interfaces import use_test_environment, write_sweep_yaml
from sbprof.jobs.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.predictions import held_out_validation
from sbprof.results import load_results
from sbprof.sweep.config import load_config

EXAMPLE = Path(__file__).resolve().parents[1] / "sbprof" / "data" / "example_audio.wav"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


@pytest.mark.slow
@pytest.mark.parametrize("model, interface", [("encoder_asr", "EncoderASR"),
                                              ("encoder_decoder_asr", "EncoderDecoderASR")])
def test_triangle_predicts_the_measured_corner_of_a_real_model(tmp_path, model, interface):
    """Peak memory of the corner predicted within 15 % (median relative error); every figure validated.

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
    reports = held_out_validation(load_results(folder).records)
    errors = {figure: r.median_abs_rel_error for (_, figure), r in reports.items()}
    assert set(errors) == {"time_s", "batch_memory_bytes", "peak_memory_bytes"}
    assert errors["peak_memory_bytes"] <= 0.15, errors
    assert all(0 <= e < float("inf") for e in errors.values()), errors
    assert "Held-out validation of the predictions" in (folder / "report.md").read_text()
