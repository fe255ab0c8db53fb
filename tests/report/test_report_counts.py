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
