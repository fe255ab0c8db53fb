"""What limits this, for the transducer job, on hand-made results whose answer is known: the fastest backend that
agrees with the reference is named (never one that disagrees), the one that runs out of memory first is named; on
a balanced workload (no clear winner, no OOM) neither verdict fires."""
from __future__ import annotations

import pytest

from sbprof.analysis.transducer import analyse
from sbprof.record import Cell, Measurement, MemoryPeak
from sbprof.report.transducer import render_markdown
from sbprof.results.store import Results

AGREE = {"ok": True, "max_loss_rel_diff": 1e-7, "max_grad_abs_diff": 2e-5}
WRONG = {"ok": False, "message": "loss differs by 3e-02"}


def make(label, wall, agreement=AGREE, status="ok", batch_size=4):
    cell = Cell(model=label, threads=2, batch_size=batch_size, params={"mode": "fixed"})
    return Measurement(label=label, cell=cell, wall_s=wall, cpu_s=wall, status=status,
                       message="CUDA out of memory" if status == "oom" else "",
                       memory=MemoryPeak(peak_rss_bytes=900_000_000, peak_rss_delta_bytes=5_000_000),
                       extra={"agreement": agreement})


def by_rule(summary):
    return {v.rule: v for v in summary.limits.verdicts}


def test_fastest_agreeing_backend_is_named_never_the_faster_one_that_disagrees_and_the_oom_one_is_named():
    records = [make("slow", [0.0020, 0.0021, 0.0019, 0.0020]),
               make("quick", [0.0010, 0.0011, 0.0009, 0.0010]),
               make("fast_but_wrong", [0.0004] * 4, agreement=WRONG),
               make("hungry", [], agreement=None, status="oom", batch_size=8),
               make("quick", [0.0030] * 3, batch_size=8),
               make("slow", [0.0050] * 3, batch_size=8)]
    summary = analyse(Results("transducer", records=records))
    verdicts = by_rule(summary)
    fastest = [v for v in summary.limits.verdicts if v.rule == "fastest backend"]
    assert fastest[0].sentence.startswith("quick is the fastest backend that agrees with the reference at batch "
                                          "size 4")
    assert "2.00x faster than slow" in fastest[0].sentence  # 2.0 ms / 1.0 ms, by hand
    assert "fast_but_wrong ran faster but disagrees" in fastest[0].sentence
    assert all(not v.sentence.startswith("fast_but_wrong") for v in fastest)
    step = fastest[0].figures[0]
    assert step.value == pytest.approx(0.0010) and step.low < 0.0010 < step.high
    assert verdicts["memory"].sentence == ("hungry runs out of memory first, at batch size 8, cpu, 2 thread(s) "
                                           "(quick, slow fit there).")
    text = render_markdown(summary)
    assert text.rstrip().endswith("its figures come from the tables above.")
    assert "1. **memory.** hungry runs out of memory first" in text  # an OOM stops a run: listed first


def test_balanced_backends_name_no_fastest_and_no_oom_and_say_why():
    records = [make("a", [0.0010, 0.0012, 0.0009, 0.0011]), make("b", [0.0011, 0.0010, 0.0012, 0.0009])]
    summary = analyse(Results("transducer", records=records))
    assert summary.limits.verdicts == []
    assert summary.limits.undecided == ["fastest backend at batch size 4, cpu, 2 thread(s): a and b's step-time "
                                        "intervals overlap"]


def test_no_agreeing_backend_is_never_named_fastest():
    summary = analyse(Results("transducer", records=[make("wrong", [0.0004] * 4, agreement=WRONG)]))
    assert summary.limits.verdicts == []
    assert "no backend passed the correctness check" in summary.limits.undecided[0]
