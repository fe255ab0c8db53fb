"""The typed record payloads of train, transducer, stream, run and rank records, and the figures the analyses now
compute for the renderers (checked against hand-computed values); the renderers return their files by name."""
from __future__ import annotations

import pytest

from sbprof.analysis import distributed as dist
from sbprof.analysis import run as run_analysis
from sbprof.analysis import stream as stream_analysis
from sbprof.analysis import train as train_analysis
from sbprof.analysis import transducer as transducer_analysis
from sbprof.analysis.breakdown import ModuleBreakdown, breakdown_steps
from sbprof.base.errors import ConfigError
from sbprof.record import Cell, Measurement, Results
from sbprof.report import run as run_report
from sbprof.report import stream as stream_report
from sbprof.report import train as train_report
from sbprof.report import transducer as transducer_report
from sbprof.report.distributed import render as render_merged

BREAKDOWN = {"step": "train", "mode": "light", "steps": 2, "step_ms_samples": [10.0, 14.0],
             "cuda_step_ms_samples": [3.0, 5.0],
             "rows": [{"label": "enc", "type": "Enc", "depth": 0, "calls": 1.0, "total_ms": 9.0, "share": 0.75,
                       "forward_ms": 4.0, "backward_ms": 5.0},
                      {"label": "(other)", "type": "", "depth": 0, "calls": 0.0, "total_ms": 3.0, "share": 0.25}]}


def train_record(**extra):
    base = {"audio_s_per_step": [2.0, 3.0], "loadavg_1m": 3.5, "modules": BREAKDOWN,
            "flops": {"per_step": [100.0, 300.0], "macs_per_step": [40.0, 60.0], "modules": {"enc": [50.0, 50.0]},
                      "untracked": {"aten.foo": 2}},
            "params": {"total": 10, "trainable": 4, "bytes_by_dtype": {"float32": 40},
                       "modules": [{"name": "enc", "type": "Enc", "depth": 0, "total": 10, "trainable": 4,
                                    "own": 0, "shared": False}]}}
    return Measurement("train:ctc", Cell(model="ctc", threads=2), wall_s=[1.0, 3.0], extra={**base, **extra})


def test_a_train_cell_carries_the_figures_its_table_prints():
    (cell,) = train_analysis.analyse(Results("train", records=[train_record()])).cells
    f = cell.figures
    assert (f.step_s_median, f.audio_s_per_s, f.flops_per_step, f.flops_per_audio_s) == (2.0, 5 / 4, 200.0, 80.0)
    assert (cell.audio_s, cell.audio_steps, cell.macs_per_step, cell.other_load) == (5.0, 2, 50.0, 1.5)
    assert cell.steps.mean_ms == 12.0 and cell.steps.cuda_mean_ms == 4.0 and cell.steps.step.median == 12.0
    (row,) = cell.flops  # 100 FLOPs of enc per step over a mean of 200 per step; its time share from the breakdown
    assert (row.label, row.forward, row.flops_share, row.time_share) == ("enc", 50.0, 0.5, 0.75)
    text = train_report.render(train_analysis.analyse(Results("train", records=[train_record()])))["report.md"]
    assert "1.25 s/s (5.00 s of audio in 2 steps)" in text and "about 1.5 more busy with other work" in text
    assert "step 12.0 ms" in text and "step 4.00 ms" in text  # host and GPU clock means


def test_a_hand_edited_train_payload_is_one_line_naming_its_field():
    bad = train_record(flops={"per_step": ["many", 1.0]})
    with pytest.raises(ConfigError, match=r"record 'train:ctc': extra\.flops\.per_step\[0\]: expected a number"):
        train_analysis.analyse(Results("train", records=[bad]))


def test_the_transducer_search_row_is_in_mb_and_the_csv_keeps_an_unchecked_agreement_empty():
    search = Measurement("quick", Cell(model="quick", params={"mode": "search", "searched": "batch_size",
                                                              "budget_bytes": 3_000_000}),
                         extra={"search": {"largest": 4, "probes": [[2, 1_500_000, True], [8, None, False]],
                                           "capped": False}})
    plain = Measurement("plain", Cell(model="plain", batch_size=2, params={"mode": "fixed"}), wall_s=[0.1])
    summary = transducer_analysis.analyse(Results("transducer", records=[search, plain]))
    (row,) = summary.searches
    assert (row.budget_mb, row.probes_mb, row.payload.largest) == (3.0, [(2, 1.5), (8, None)], 4)
    files = transducer_report.render(summary)
    assert sorted(files) == ["report.md", "results.csv"]
    assert "| 3 | 4 | 2: 2, 8: OOM |" in files["report.md"]
    plain_row = [line for line in files["results.csv"].splitlines() if line.startswith("plain,")][0]
    assert ",,,," in plain_row  # agreement_ok, max_loss_rel_diff, max_grad_abs_diff: not checked, empty


def _chunks(n, chunk_s):
    arrival = [(i + 1) * chunk_s for i in range(n)]
    return {"stream": [0] * n, "index": list(range(n)), "samples": [160] * n, "arrival_s": arrival,
            "start_s": arrival, "end_s": [a + 0.002 for a in arrival], "tokens": [1] * n, "memory_bytes": [None] * n}


def test_stream_loads_span_every_setting_and_the_felt_latency_adds_the_look_ahead():
    def latency(threads, load):
        return Measurement("c", Cell(model="m", threads=threads, params={"kind": "latency", "chunk_size": 1,
                                                                        "left_context_chunks": 1, "streams": 1}),
                           wall_s=[0.002] * 4, settings={"utterance_samples": 640},
                           extra={"chunks": _chunks(4, 0.01), "sample_rate": 16000, "chunk_samples": 160,
                                  "right_context_samples": 160, "loadavg_1m": load})
    summary = stream_analysis.analyse(Results("stream", records=[latency(1, 0.5), latency(2, 2.5)]))
    assert summary.loads == (0.5, 2.5)
    row = summary.settings[0].rows[0]
    # 10 ms of chunk + 10 ms of look-ahead, and every steady delay is the 2 ms of compute
    assert row.algorithmic_ms == pytest.approx(20.0) and row.felt_ms == pytest.approx(22.0)
    files = stream_report.render(summary)  # plots come back as PNG bytes, named as the report links them
    plots = sorted(name for name in files if name.startswith("plots/"))
    assert "plots/stream-cdf-cpu-1threads.png" in plots and "plots/stream-tradeoff-cpu-2threads.png" in plots
    assert all(files[name].startswith(b"\x89PNG\r\n\x1a\n") and f"({name})" in files["report.md"] for name in plots)
    assert "Machine load (1-minute load average after each cell): 0.50 to 2.50." in files["report.md"]


def test_run_traces_once_and_the_continue_rule():
    stage = Measurement("t:train", Cell(model="t", variant="train"), wall_s=[0.1],
                        extra={"kind": "loop", "traces": ["/x/a.json", "/x/b.json"]})
    other = Measurement("t:valid", Cell(model="t", variant="valid"), wall_s=[0.1],
                        extra={"kind": "loop", "traces": ["/x/a.json"]})
    report = run_analysis.analyse(Results("run", rules={"script": "s.py", "continue": True}, records=[stage, other]))
    assert report.traces == ["/x/a.json", "/x/b.json"] and report.continued
    text = run_report.render(report)["report.md"]
    assert "`a.json`, `b.json` in `traces/`" in text and "then the script went on (--continue)" in text


def test_rank_payload_and_hosts_of_a_merged_run():
    def rank(r, host):
        return Measurement(f"rank {r}", Cell(model="step", rank=r), wall_s=[1.0, 1.0],
                           settings={"distributed": {"host": host, "node_rank": int(host[-1])}},
                           extra={"rank": {"section": "train", "steps": [0, 1], "comm_s": [0.1, 0.2],
                                           "end": "exit"}, "utterances_per_step": [4.0, 4.0]})
    records = [rank(0, "h0"), rank(1, "h0"), rank(2, "h1")]
    analysis = dist.RunAnalysis(world_size=3)
    for m in records:
        analysis.add_steps(m)
    for m in records:
        analysis.add_rank(m)
    summary = dist.summarise_run(analysis, "r", "gloo", "/f")
    assert summary.hosts == 2 and summary.sections[0].key == "train"
    files = render_merged(summary)
    assert sorted(files) == ["ranks.csv", "report.md"] and "on 2 hosts / node" in files["report.md"]
    bad = rank(3, "h1")
    bad.extra["rank"]["steps"] = "two"
    with pytest.raises(ConfigError, match=r"record 'rank 3': extra\.rank\.steps: expected a list"):
        analysis.add_steps(bad)


def test_breakdown_steps_read_a_saved_breakdown():
    steps = breakdown_steps(ModuleBreakdown.from_dict(BREAKDOWN))
    assert (steps.mean_ms, steps.cuda_mean_ms, steps.step.q1) == (12.0, 4.0, 11.0)
    assert breakdown_steps(None) is None


CPU_BREAKDOWN = {**BREAKDOWN, "cpu_step_ms_samples": [8.0, 10.0],
                 "rows": [{**BREAKDOWN["rows"][0], "cpu_total_ms": 6.0, "cpu_self_ms": 6.0},
                          {**BREAKDOWN["rows"][1], "cpu_total_ms": 3.0, "cpu_self_ms": 3.0}]}


def test_train_and_run_give_the_module_breakdown_its_audio_per_step():
    # Train: 2.5 s of audio per measured step (2 and 3 s); enc burns 6 ms of CPU per step: 0.0024 core-s per audio s.
    (cell,) = train_analysis.analyse(Results("train", records=[train_record(modules=CPU_BREAKDOWN)])).cells
    assert cell.steps.audio_s_per_step == 2.5 and cell.steps.cpu_cost["enc"] == pytest.approx(0.006 / 2.5)
    text = train_report.render(train_analysis.analyse(Results("train", records=[train_record(
        modules=CPU_BREAKDOWN)])))["report.md"]
    assert "| 6.00     | 6.00          | 0.00240    |" in text
    # Audio of another number of steps than the breakdown's: no cost rather than one over the wrong steps.
    odd = train_record(modules=CPU_BREAKDOWN, audio_s_per_step=[2.0, 3.0, 4.0])
    (cell,) = train_analysis.analyse(Results("train", records=[odd])).cells
    assert cell.steps.audio_s_per_step is None and cell.steps.cpu_cost == {}
    # Run: 4 s of audio per measured step (one warm-up left out).
    stage = Measurement("t:train", Cell(model="t", variant="train"), warmup=1, wall_s=[0.1, 0.3],
                        extra={"kind": "loop", "audio_s": [9.0, 4.0, 4.0], "modules": CPU_BREAKDOWN})
    (s,) = run_analysis.analyse(Results("run", records=[stage])).stages
    assert s.modules_steps.cpu_cost == {"enc": pytest.approx(0.006 / 4), "(other)": pytest.approx(0.003 / 4)}
    text = run_report.render(run_analysis.analyse(Results("run", records=[stage])))["report.md"]
    assert "| 9.00          | 4.00         | 5.00          | 75.0%           | 6.00     | 0.00150    |" in text
