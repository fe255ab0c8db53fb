"""sbprof run's share of the device's peak, from records built with known figures: the peak of the work's own
precision, and "peak unknown" (never a number) for a GPU sbprof's datasheet table lacks."""
from __future__ import annotations

import pytest

from sbprof.analysis.run import analyse
from sbprof.measuring.flops.peak import datasheet_peak
from sbprof.record import Cell, Measurement, Results
from sbprof.report.run import render_run


def _stage(peak):
    # 4 steps of 10 ms, 5 GFLOP each: 500 GFLOP/s achieved
    return Measurement("s:train", Cell(model="s", variant="train", device="cuda:0"), warmup=1, wall_s=[0.01] * 4,
                       cpu_s=[0.01] * 4, extra={"kind": "loop", "flops": {"total": 5e9}, "peak_flops": peak})


def test_bf16_work_is_a_share_of_the_bf16_peak():
    rate, detail = datasheet_peak("NVIDIA H200", "bf16")
    (stage,) = analyse(Results("run", records=[_stage({"flops_per_s": rate, "precision": "bf16",
                                                       "source": "datasheet"})])).stages
    assert stage.achieved_flops_per_s == pytest.approx(5e11)
    assert stage.share_of_peak == pytest.approx(5e11 / 989.5e12)
    assert "bf16, datasheet" in stage.peak_source


def test_a_gpu_missing_from_the_table_reads_peak_unknown():
    _, why = datasheet_peak("NVIDIA A10G", "bf16")
    report = analyse(Results("run", records=[_stage({"flops_per_s": None, "precision": "bf16", "source": why})]))
    (stage,) = report.stages
    assert stage.share_of_peak is None and stage.achieved_flops_per_s == pytest.approx(5e11)
    row = next(line for line in render_run(report).splitlines() if line.startswith("| share of the device's peak"))
    assert "n/a (peak unknown: NVIDIA A10G is not in sbprof's datasheet table)" in row


def test_work_faster_than_a_probed_peak_reads_no_share_and_says_the_peak_read_low():
    # 500 GFLOP/s achieved against a CPU probe that read 200 (a busy machine when it ran): 250 % is no share.
    report = analyse(Results("run", records=[_stage({"flops_per_s": 2e11, "precision": "fp32",
                                                     "source": "matmul probe"})]))
    (stage,) = report.stages
    assert stage.share_of_peak is None and stage.achieved_flops_per_s == pytest.approx(5e11)
    row = next(line for line in render_run(report).splitlines() if line.startswith("| share of the device's peak"))
    assert ("n/a (achieved is above the peak, 200 GFLOP/s fp32, matmul probe: the peak read low; delete "
            "peak_flops.json in sbprof's cache to probe again)") in row and "%" not in row
