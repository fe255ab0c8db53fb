"""Count reports: the typed result the analysis reads, and the figures it derives, against hand-computed numbers."""
from __future__ import annotations

import pytest

from sbprof.analysis.counts import analyse
from sbprof.base.errors import ConfigError
from sbprof.record import Measurement, Results
from sbprof.report.counts import render

FLOPS = {"flops": 3_000_000, "macs": 1_500_000, "backward_flops": 5_000_000, "backward_macs": 2_500_000,
         "modules": [{"name": "", "type": "Net", "depth": 0, "calls": 1, "flops": 3_000_000, "macs": 1_500_000,
                      "self_flops": 0, "self_macs": 0}],
         "operators": [{"name": "aten.addmm", "calls": 2, "flops": 3_000_000, "macs": 1_500_000, "backward_calls": 0,
                        "backward_flops": 0},
                       {"name": "aten.mm", "calls": 0, "flops": 0, "macs": 0, "backward_calls": 3,
                        "backward_flops": 5_000_000}],
         "untracked": {"aten.fft": 1}, "conventions": "sbprof-flops-1", "audio_s": 2.0}


def counted(job, result, status="ok", message=""):
    record = Measurement(label="m", status=status, message=message, extra={"result": result},
                         settings={"input": "random tensors of shapes [[4, 16]]"})
    return Results(job, models={"m.yaml": {}}, records=[record])


def test_flops_report_derives_per_audio_second_and_ranks_operators():
    summary = analyse(counted("flops", FLOPS))
    # (3 M forward + 5 M backward) / 2 s of audio = 4 MFLOP per second
    assert summary.flops.per_audio_s == 4_000_000
    assert [op.name for op in summary.flops.ranked] == ["aten.mm", "aten.addmm"]  # 5 M before 3 M
    text = render(summary)["report.md"]
    assert text.startswith("# sbprof flops: m.yaml (random tensors of shapes [[4, 16]])\n")
    assert "; 4.00 MFLOP per second of audio (2.00 s counted)" in text
    assert "| aten.mm    | 3       | 0               | 5.00 M           |" in text
    assert "`aten.fft` (1 calls)" in text


def test_a_failed_count_and_a_value_of_the_wrong_kind():
    text = render(analyse(counted("params", {}, status="error", message="TypeError: no")))["report.md"]
    assert text.endswith("\n\nerror: TypeError: no\n")
    with pytest.raises(ConfigError, match="ParamCount.total: expected an integer"):
        analyse(counted("params", {"total": "many", "trainable": 1, "frozen": 0}))


BREAKDOWN = {"step": "call", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 12.0],
             "cpu_step_ms_samples": [8.0, 10.0],
             "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 8.0, "share": 0.727,
                       "forward_ms": 8.0, "forward_self_ms": 8.0, "cpu_total_ms": 6.0, "cpu_self_ms": 6.0}]}


def test_modules_report_shows_cpu_cost_per_audio_second_only_with_audio():
    # 6 ms of CPU per call over 2 s of audio per call = 0.003 core-seconds per second of audio; step 9 ms / 2 s.
    text = render(analyse(counted("modules", {**BREAKDOWN, "audio_s": 2.0})))["report.md"]
    assert "| 6.00     | 6.00          | 0.00300    |" in text
    assert "CPU per step 9.00 ms, CPU cost 0.00450 core-seconds per second of audio (2.00 s of audio per step)" in text
    text = render(analyse(counted("modules", {**BREAKDOWN, "audio_s": None})))["report.md"]
    assert "| 6.00     | 6.00          | n/a (no audio) |" in text and "CPU cost n/a (no audio)" in text
    # A file written before CPU times were measured: no CPU columns, no CPU line.
    old = {**BREAKDOWN, "rows": [{k: v for k, v in BREAKDOWN["rows"][0].items() if not k.startswith("cpu")}]}
    del old["cpu_step_ms_samples"]
    text = render(analyse(counted("modules", old)))["report.md"]
    assert "CPU" not in text and "| 8.00       | 72.7%   |" in text
    with pytest.raises(ConfigError, match="audio_s"):
        analyse(counted("modules", {**BREAKDOWN, "audio_s": "long"}))
