"""Renderers on a hand-built list of Measurements with known samples: golden output, no measuring."""
from __future__ import annotations

import csv
import io

import pytest

from sbprof.analysis.sweep import analyse
from sbprof.registry import render_only
from sbprof.analysis.predictions import held_out_validation
from sbprof.record import Cell, Env, Measurement, MemoryPeak
from sbprof.report import cells_csv, sweep_markdown
from sbprof.report.cells_csv import COLUMNS
from sbprof.results.store import Results, ResultStore


def render_markdown(results):
    return sweep_markdown.render_markdown(analyse(results))


def render_csv(results):
    summary = analyse(results)
    return cells_csv.render_csv(summary.rows)


def render_results(target):
    return render_only(target)

ENV = Env(python="3.11.7", cpu="Test CPU", cpu_count=16, torch="2.14.1", torchaudio="2.11.0",
          speechbrain="1.1.2", cuda="13.0", gpu="Test GPU")
SETTINGS = {"interface": "EncoderASR", "method": "transcribe_batch", "example_audio": None, "seed": 1234}
RULES = {"input": "random:seed=1234", "warmup": 1, "measured": 4}


def cell(device, threads, audio_s, batch_size, status="ok", wall=(), cpu=(), cuda=None, memory=None, message="",
         extra=None, model="encoder_asr"):
    where = Cell(model=model, device=device, threads=threads, audio_s=audio_s, batch_size=batch_size,
                 input="random:seed=1234")
    return Measurement(label="c", cell=where, warmup=1, wall_s=list(wall), cpu_s=list(cpu),
                       cuda_s=None if cuda is None else list(cuda), audio_seconds=float(audio_s * batch_size),
                       memory=memory, settings=dict(SETTINGS), status=status, message=message, env=ENV,
                       extra=dict(extra or {}))


def results(records):
    return Results("profile", rules=dict(RULES), records=list(records))


def measurements():
    """Known samples: e.g. CPU (1 s, batch 1) takes 0.1..0.4 s -> RTF median 0.25, quartiles 0.175 / 0.325."""
    cpu_mem = MemoryPeak(peak_rss_bytes=1_234_567_890, peak_rss_delta_bytes=52_000_000, rss_method="clear_refs",
                         heap_trim="malloc_trim")
    gpu_mem = MemoryPeak(peak_rss_bytes=3_000_000_000, peak_cuda_bytes=512_000_000, peak_cuda_delta_bytes=64_000_000)
    # profiled batches: (1 s, 1) launch-bound, (1 s, 2) GPU-bound, (2 s, 1) whose profiling failed
    launch_bound = {"device_split": {"wall_s": 0.012, "host_busy_s": 0.011, "gpu_busy_s": 0.004}}
    gpu_bound = {"device_split": {"wall_s": 0.024, "host_busy_s": 0.006, "gpu_busy_s": 0.02}}
    return [
        cell("cpu", 1, 1, 1, wall=[0.1, 0.2, 0.3, 0.4], cpu=[0.1, 0.2, 0.3, 0.4], memory=cpu_mem),
        cell("cpu", 1, 1, 2, status="skipped", message="skipped by the triangle rule"),
        cell("cpu", 1, 2, 1, status="oom", message="MemoryError: no memory"),
        cell("cpu", 1, 2, 2, status="error",
             message="RuntimeError: shape | mismatch in layer 3 of the encoder, deep inside"),
        cell("cuda:0", 8, 1, 1, wall=[0.01, 0.02, 0.03, 0.04], cpu=[0.008, 0.009, 0.01, 0.011],
             cuda=[0.004, 0.005, 0.006, 0.007], memory=gpu_mem, extra=launch_bound),
        cell("cuda:0", 8, 1, 2, wall=[0.02] * 4, cpu=[0.01] * 4, cuda=[0.015] * 4, memory=gpu_mem, extra=gpu_bound),
        cell("cuda:0", 8, 2, 1, wall=[0.03] * 4, cpu=[0.02] * 4, cuda=[0.025] * 4, memory=gpu_mem,
             extra={"extra_error": "RuntimeError: CUPTI failed"}),
    ]


GOLDEN = r"""# sbprof profiling report

- **Model**: `encoder_asr` through `EncoderASR`, method `transcribe_batch`
- **Input**: seeded white Gaussian noise (`random:seed=1234`)
- **Schedule**: 1 warm-up batch, then 4 measured batches per cell, then one batch for memory; each (device, threads) setting runs in a fresh worker process
- **Machine**: Test CPU (16 logical cores); Test GPU (CUDA 13.0); torch 2.14.1, torchaudio 2.11.0, speechbrain 1.1.2, Python 3.11.7
- **Cells**: 4 measured, 1 skipped, 1 out of memory, 1 failed

Cells show `skipped` when pruned by the triangle rule, `OOM` when the batch ran out of memory, `error: ...` when it raised (the full message is in results.json), `not measured` when no result exists yet.

## cuda:0, 8 threads

### Real-time factor (RTF)

RTF = real-time factor: processing time of a batch / total seconds of audio in the batch (lower is faster; < 1 is faster than real time). Processing time is the wall-clock time of one call, device synchronised before and after. Each cell: median [first quartile, third quartile] over the 4 measured batches.

| audio \ batch   | 1                       | 2                       |
|-----------------|-------------------------|-------------------------|
| 1 s             | 0.0250 [0.0175, 0.0325] | 0.0100 [0.0100, 0.0100] |
| 2 s             | 0.0150 [0.0150, 0.0150] | not measured            |

### Host busy / GPU busy

From one extra profiled batch per cell (run in a separate process after the timed ones): host busy = host busy time of one profiled batch / audio seconds: its wall time minus the time the host was blocked waiting for the GPU (cuda*Synchronize, cudaMemcpy*); GPU busy = GPU busy time of one profiled batch / audio seconds: the durations of its kernels, copies and memsets, each counted once; `of` = that batch's wall time / audio seconds (it includes the profiler's own cost, about 1 us per operator). Host busy close to the wall time and GPU busy well below it: launch-bound (the GPU waits for the host); GPU busy close to the wall time: GPU-bound.

| audio \ batch   | 1                                | 2                               |
|-----------------|----------------------------------|---------------------------------|
| 1 s             | 1.10E-02 / 4.00E-03 of 1.20E-02  | 3.00E-03 / 1.00E-02 of 1.20E-02 |
| 2 s             | n/a (RuntimeError: CUPTI failed) | not measured                    |

### RTFx

RTFx = inverse real-time factor: total seconds of audio in the batch / processing time (higher is faster), from the median batch time (= 1 / median RTF).

| audio \ batch   | 1    | 2            |
|-----------------|------|--------------|
| 1 s             | 40.0 | 100          |
| 2 s             | 66.7 | not measured |

### Memory one batch adds (GB)

GB (10^9 bytes) = CUDA memory one call adds: allocator peak during the call minus the allocation just before it. Measured on one extra batch after the timed ones, so it does not depend on which cells ran before (median over runs).

| audio \ batch   | 1     | 2            |
|-----------------|-------|--------------|
| 1 s             | 0.064 | 0.064        |
| 2 s             | 0.064 | not measured |

### Peak memory (GB)

Peak memory in GB (10^9 bytes) = peak memory allocated by PyTorch's CUDA caching allocator during one call (model weights included).

| audio \ batch   | 1     | 2            |
|-----------------|-------|--------------|
| 1 s             | 0.512 | 0.512        |
| 2 s             | 0.512 | not measured |

## cpu, 1 thread

### Real-time factor (RTF)

RTF = real-time factor: processing time of a batch / total seconds of audio in the batch (lower is faster; < 1 is faster than real time). Processing time is the wall-clock time of one call, device synchronised before and after. Each cell: median [first quartile, third quartile] over the 4 measured batches.

| audio \ batch   | 1                    | 2                                               |
|-----------------|----------------------|-------------------------------------------------|
| 1 s             | 0.250 [0.175, 0.325] | skipped                                         |
| 2 s             | OOM                  | error: RuntimeError: shape / mismatch in layer… |

### CPU cost (core-seconds per audio second)

CPU cost = CPU time of the worker's threads / audio seconds: what a CPU core spends to serve this model, independent of waiting for a core; with several threads it includes threads that spin while waiting (OpenMP). Each cell as in the RTF table, on each call's CPU time instead of its wall time; the wall time and RTF above stay the figures a user waits for. `(judged)`: adaptive repeats judged this cell's precision on CPU time. Median over cells: 0.250 core-seconds per audio second = 0.250 core-hours per hour of audio (the same ratio).

| audio \ batch   | 1                    | 2                                               |
|-----------------|----------------------|-------------------------------------------------|
| 1 s             | 0.250 [0.175, 0.325] | skipped                                         |
| 2 s             | OOM                  | error: RuntimeError: shape / mismatch in layer… |

### RTFx

RTFx = inverse real-time factor: total seconds of audio in the batch / processing time (higher is faster), from the median batch time (= 1 / median RTF).

| audio \ batch   | 1    | 2                                               |
|-----------------|------|-------------------------------------------------|
| 1 s             | 4.00 | skipped                                         |
| 2 s             | OOM  | error: RuntimeError: shape / mismatch in layer… |

### Memory one batch adds (GB)

GB (10^9 bytes) = memory one call adds: peak resident memory during the call minus resident memory just before it, garbage collected and freed heap handed back to the system first (glibc malloc_trim), so memory kept from earlier calls cannot hide it. Measured on one extra batch after the timed ones, so it does not depend on which cells ran before (median over runs).

| audio \ batch   | 1     | 2                                               |
|-----------------|-------|-------------------------------------------------|
| 1 s             | 0.052 | skipped                                         |
| 2 s             | OOM   | error: RuntimeError: shape / mismatch in layer… |

### Peak memory (GB)

Peak memory in GB (10^9 bytes) = peak resident memory of the whole process during one call (model weights and everything the process holds included).

| audio \ batch   | 1     | 2                                               |
|-----------------|-------|-------------------------------------------------|
| 1 s             | 1.235 | skipped                                         |
| 2 s             | OOM   | error: RuntimeError: shape / mismatch in layer… |

## What limits this

1. **memory.** cpu, 1 thread ran out of memory at 2 s x batch 1; the largest cell that fits is 1 s x batch 1 (peak 1.23 GB).
   - figures: peak at 1 s x batch 1 1.23 GB
   - rule: a cell ran out of memory, or the largest fitting cell is named
   - try: smaller batches or shorter segments, half precision, or a device with more memory
2. **real-time.** cpu, 1 thread stays real-time in every measured cell, up to 1 s x batch 1 (RTF 0.25).
   - figures: RTF at 1 s x batch 1 0.250 [0.175, 0.325]
   - rule: RTF < 1
   - try: a margin of 4x: longer utterances or larger batches stay real-time up to about that factor
3. **real-time.** cuda:0, 8 threads stays real-time in every measured cell, up to 2 s x batch 1 (RTF 0.015).
   - figures: RTF at 2 s x batch 1 0.0150 [0.0150, 0.0150]
   - rule: RTF < 1
   - try: a margin of 66.7x: longer utterances or larger batches stay real-time up to about that factor

Each verdict fires when its rule's threshold is passed (the thresholds and their reasons: sbprof's README,
"What limits this"); its figures come from the tables above.
"""


def test_golden_markdown():
    assert render_markdown(results(measurements())) == GOLDEN


def test_order_of_records_does_not_matter():
    assert render_markdown(results(reversed(measurements()))) == GOLDEN


def test_empty_report():
    assert "No cells recorded yet" in render_markdown(results([]))


def test_csv_has_one_row_per_cell_with_all_numbers():
    rows = list(csv.DictReader(io.StringIO(render_csv(results(measurements())))))
    assert tuple(rows[0]) == COLUMNS
    assert [(r["device"], r["audio_s"], r["batch_size"], r["status"]) for r in rows] == [
        ("cuda:0", "1", "1", "ok"), ("cuda:0", "1", "2", "ok"), ("cuda:0", "2", "1", "ok"),
        ("cpu", "1", "1", "ok"), ("cpu", "1", "2", "skipped"), ("cpu", "2", "1", "oom"), ("cpu", "2", "2", "error")]
    gpu, cpu = rows[0], rows[3]
    assert float(cpu["rtf_median"]) == pytest.approx(0.25)
    assert float(cpu["rtf_q1"]) == pytest.approx(0.175) and float(cpu["rtf_q3"]) == pytest.approx(0.325)
    assert float(cpu["rtfx"]) == pytest.approx(4.0)
    assert float(cpu["peak_memory_gb"]) == pytest.approx(1.23456789)
    assert cpu["rtf_cuda_median"] == "" and cpu["peak_cuda_bytes"] == ""
    assert float(gpu["rtf_cuda_median"]) == pytest.approx(0.0055)
    assert float(gpu["peak_memory_gb"]) == pytest.approx(0.512)  # CUDA allocator peak on CUDA
    assert float(gpu["batch_memory_gb"]) == pytest.approx(0.064) and float(cpu["batch_memory_gb"]) == 0.052
    assert float(gpu["host_busy_rtf"]) == pytest.approx(0.011) and float(gpu["gpu_busy_rtf"]) == pytest.approx(0.004)
    assert cpu["host_busy_rtf"] == "" and cpu["heap_trim"] == "malloc_trim"
    assert rows[6]["message"].endswith("deep inside")  # the CSV keeps the whole message


def test_render_results_rereads_a_results_file(tmp_path):
    store = ResultStore(tmp_path, Results("profile", rules=dict(RULES)))
    store.add_many(measurements())
    outputs = render_results(tmp_path / "results.json")
    report = outputs["report.md"].read_text()
    plot_line = "![RTF and memory versus audio length, encoder_asr](plots/sweep-encoder_asr.png)"
    assert plot_line in report and outputs["plots/sweep-encoder_asr.png"].stat().st_size > 0
    # the saved records re-render to the golden text, with the plot and its caption added under the header
    def text(lines):
        return [line for line in lines if line and line != plot_line and not line.startswith("The plot: median")]

    assert text(report.splitlines()) == text(GOLDEN.splitlines())
    assert outputs["results.csv"].read_text() == render_csv(results(measurements()))


def test_machine_load_is_stated_and_contention_flagged():
    quiet, busy = measurements()[:1], measurements()[:1]
    quiet[0].extra["loadavg_1m"] = 1.04
    busy[0].extra["loadavg_1m"] = 17.5  # ENV has 16 cores
    quiet_report = render_markdown(results(quiet))
    assert "1-minute load average read after each cell was 1.04-1.04 on 16 logical cores" in quiet_report
    assert "upper bounds" not in quiet_report
    assert "other processes competed for the CPU, so read these times as upper bounds" in render_markdown(results(busy))
    assert "Machine load" not in GOLDEN  # records without a load reading: no claim about it


def test_several_models_get_a_section_each():
    two = measurements()[:1] + [cell("cpu", 1, 1, 1, wall=[0.2] * 4, cpu=[0.2] * 4, model="other")]
    report = render_markdown(results(two))
    assert "- **Model**: `encoder_asr` through `EncoderASR`" in report and "- **Model**: `other`" in report
    assert report.index("## encoder_asr") < report.index("### cpu, 1 thread") < report.index("## other")


def test_a_version_1_results_file_still_renders(tmp_path):
    """A results.json written by sbprof 0.1.0 (format sbprof-sweep-results, version 1)."""
    v1 = {"format": "sbprof-sweep-results", "version": 1,
          "settings": {"model": "encoder_asr", "model_kind": "local_model", "interface": "EncoderASR",
                       "method": "transcribe_batch", "args": ["wavs", "wav_lens"], "input": "random:seed=1234",
                       "warmup_batches": 1, "measured_batches": 4},
          "cells": [{"schema_version": 1, "label": "c", "device": "cpu", "num_threads": 1, "warmup": 1,
                     "wall_s": [0.1, 0.2, 0.3, 0.4], "cpu_s": [0.1, 0.2, 0.3, 0.4], "cuda_s": None,
                     "memory": {"peak_rss_bytes": 1_234_567_890, "peak_rss_delta_bytes": 52_000_000,
                                "rss_method": "clear_refs", "peak_cuda_bytes": None, "peak_cuda_delta_bytes": None,
                                "peak_cuda_reserved_bytes": None},
                     "config": {"model": "encoder_asr", "interface": "EncoderASR", "method": "transcribe_batch",
                                "input": "random:seed=1234", "example_audio": None, "seed": 1234,
                                "device": "cpu", "threads": 1, "audio_s": 1, "batch_size": 1, "batch_audio_s": 1.0,
                                "warmup_batches": 1, "measured_batches": 4},
                     "status": "ok", "message": "", "env": None, "extra": {},
                     "derived": {"rtf": {"median": 0.25}}}]}
    (tmp_path / "results.json").write_text(__import__("json").dumps(v1))
    report = render_results(tmp_path)["report.md"].read_text()
    assert "| 1 s             | 0.250 [0.175, 0.325] |" in report
    assert "| 1 s             | 1.235 |" in report and "| 1 s             | 0.052 |" in report


def test_every_status_has_a_label():
    from sbprof.record import STATUSES
    from sbprof.report.format import STATUS_LABELS

    assert set(STATUS_LABELS) | {"ok"} == set(STATUSES)


# ---------------------------------------------------------------- runs, noise floor, predictions

def grid_records(rtf_of, lengths, batches, runs=1, skip=(), memory_of=None, device="cpu"):
    """Records whose per-batch RTF is ``rtf_of(run)`` exactly (4 identical batches per run)."""
    out = []
    for a in lengths:
        for b in batches:
            for r in range(runs):
                if (a, b) in skip:
                    if r == 0:
                        out.append(Measurement(label="c", status="skipped", settings=dict(SETTINGS),
                                               cell=Cell(model="m", device=device, threads=1, audio_s=a, batch_size=b,
                                                         input="random:seed=1234")))
                    continue
                wall = [rtf_of(a, b, r) * a * b] * 4
                mem = None if memory_of is None else MemoryPeak(peak_rss_bytes=int(memory_of(a, b)),
                                                                 peak_rss_delta_bytes=int(memory_of(a, b)))
                out.append(Measurement(label="c", cell=Cell(model="m", device=device, threads=1, audio_s=a,
                                                            batch_size=b, input="random:seed=1234", run=r),
                                       wall_s=wall, cpu_s=wall, audio_seconds=float(a * b), memory=mem,
                                       settings={**SETTINGS, "repeats": {"runs": "adaptive", "target": 0.03,
                                                                         "max_runs": runs, "confidence": 0.95}}))
    return out


def rtf_table(report):
    import re

    block = report.split("### Real-time factor (RTF)", 1)[1].split("###", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("|")]
    return {row[0]: dict(zip(rows[0][1:], row[1:])) for row in rows[2:]}, re


def test_runs_show_the_median_over_runs_and_its_interval():
    # three runs at RTF 0.10, 0.11, 0.12: median 0.11; the typical-value interval by hand: sd of the logs,
    # t(2 degrees of freedom, 97.5 %) = 4.302653, half-width t * sqrt(pi / 2) * sd / sqrt(3) in log space.
    import math
    import statistics

    records = grid_records(lambda a, b, r: 0.10 + 0.01 * r, [1], [1], runs=3)
    report = render_markdown(results(records))
    table, _ = rtf_table(report)
    half = 4.302653 * math.sqrt(math.pi / 2) * statistics.stdev(math.log(x) for x in (0.10, 0.11, 0.12)) / math.sqrt(3)
    low, high = (f"{0.11 * math.exp(h):.3g}" for h in (-half, half))
    assert table["1 s"]["1"] == f"0.110 [{low}, {high}] ±0.0% (3)*"  # * : +-3 % not reached
    assert "(results.json's `summary` names it" in report and "0 of 1 cells met the target" in report


def test_the_schedule_says_what_the_workers_did():
    # A results file of this version: its rules hold the measured minimum, its records the process warm-up.
    # With the noise floor on, a worker's first item (the one that warms the process up) is its reference batch.
    reference = _reference(0, "start", 0.02)
    reference.extra["process_warmup_calls"] = 7
    records = grid_records(lambda a, b, r: 0.1, [1], [1], runs=1)
    report = render_markdown(Results("profile", rules={**RULES, "measured_min_s": 0.25}, records=records,
                                     calibration=[reference]))
    assert ("- **Schedule**: 0 warm-up batches, then 4 measured batches per cell (more while they add up to under "
            "0.25 s), then one batch for memory; each (device, threads) setting runs in a fresh worker process, "
            "warmed up before its first cell\n") in report
    records[0].extra["process_warmup_calls"] = 7  # without the noise floor: the first cell's record
    assert "warmed up before its first cell" in render_markdown(Results("profile", rules=dict(RULES), records=records))
    assert "warmed up" not in render_markdown(results(grid_records(lambda a, b, r: 0.1, [1], [1], runs=1)))


def test_a_cell_whose_runs_agree_by_luck_gets_its_setting_spread():
    # Two cells of one setting, 4 runs each: 1 s agrees to +-0.5 %, 2 s spreads +-10 %. The table's interval of
    # the 1 s cell is its spread moderated toward the pooled one (by hand: 4 df of the pool beside its 3).
    import math
    import statistics

    calm, wide = [0.100, 0.1005, 0.0995, 0.100], [0.10, 0.11, 0.09, 0.10]
    report = render_markdown(results(grid_records(lambda a, b, r: (calm if a == 1 else wide)[r], [1, 2], [1], runs=4)))
    v = [statistics.variance(math.log(x) for x in runs) for runs in (calm, wide)]
    pooled = sum(v) / 2
    half = 2.364624 * math.sqrt(math.pi / 2 * (4 * pooled + 3 * v[0]) / 7 / 4)  # t(7 df, 97.5 %)
    low, high = (f"{0.1 * math.exp(h):.3g}" for h in (-half, half))
    assert rtf_table(report)[0]["1 s"]["1"].startswith(f"0.100 [{low}, {high}]")
    assert half > 0.03  # its own four runs alone claimed +-0.8 %


def test_an_outlying_run_is_counted_and_left_out_of_the_interval():
    # Six runs at RTF 0.100 (+-0.001) and one at 0.130: the outlier is named, the interval stays narrow.
    rtfs = [0.100, 0.101, 0.099, 0.1005, 0.0995, 0.130]
    report = render_markdown(results(grid_records(lambda a, b, r: rtfs[r], [1], [1], runs=6)))
    text = rtf_table(report)[0]["1 s"]["1"]
    assert text.startswith("0.100 [0.099") and text.endswith("(6, 1 outlier)")


def _reference(run, position, wall):
    return Measurement(label="r", cell=Cell(model="m", device="cpu", threads=1, audio_s=1, batch_size=1,
                                            input="random:seed=1234", run=run),
                       wall_s=[wall] * 4, extra={"reference": position})


def test_noise_floor_is_the_reference_batch_of_each_setting_and_flagged_when_high():
    # Per process: start and end of the reference batch; calm: +-1 %, noisy: 20 % steps between processes.
    calm = [_reference(p, pos, 0.0200 * (1 + 0.01 * (p % 2))) for p in range(4) for pos in ("start", "end")]
    noisy = [_reference(p, pos, 0.02 * (1 + 0.2 * p)) for p in range(4) for pos in ("start", "end")]
    records = grid_records(lambda a, b, r: 0.10 + 0.0005 * r, [1, 2], [1], runs=4)
    for calibration, flagged in ((calm, False), (noisy, True)):
        r = results(records)
        r.calibration = calibration
        report = render_markdown(r)
        assert "Noise floor: the reference batch (1 s x 1, " in report
        assert "timed first and last in each of the 4 worker processes" in report
        assert ("not distinguishable from this machine's noise" in report) == flagged
        # The cells' own spread (runs at 0.1000-0.1015: 0.6 %) beside the floor's.
        assert "The cells themselves varied by 0.6 % between runs" in report


def test_load_of_other_processes_flags_a_setting_that_fits_by_thread_count():
    # Two threads on two cores, with others' CPU time over the cells' windows of 0.1 (calm) or 0.8 cores (busy).
    from dataclasses import replace

    from sbprof.record import Env

    for others, flagged in ((0.1, False), (0.8, True)):
        records = grid_records(lambda a, b, r: 0.1, [1, 2], [1], runs=2)
        for m in records:
            m.cell = replace(m.cell, threads=2)
            m.env = Env(cpu_count=2)
            m.extra.update(others_cpu_s=others * 0.5, window_s=0.5)
        report = render_markdown(results(records))
        assert f"other processes kept {others:.2f} cores busy on average" in report
        assert ("**Oversubscribed once the load is counted: 2 of 2 cells" in report) == flagged


def test_a_cell_too_far_out_is_a_bound_not_a_number():
    # Time 0.01 + 0.02 B L, measured up to B L = 8; (32 s, x1) is 4x out (within twice the 2x held-out checks),
    # (32 s, x2) 8x: only a bound, the largest measured cell below it, (4 s, x2): 0.17 s over 64 s of audio.
    time_of = lambda a, b, r: (0.01 + 0.02 * a * b) / (a * b)  # noqa: E731 - RTF of that time
    records = grid_records(time_of, [1, 2, 4, 32], [1, 2], skip={(32, 1), (32, 2)}, memory_of=lambda a, b: 1e8)
    report = render_markdown(results(records))
    table, _ = rtf_table(report)
    assert table["32 s"]["1"].startswith("~0.0203 [") and table["32 s"]["1"].endswith("(pred)")
    assert table["32 s"]["2"] == f"beyond the measured range: >= {0.17 / 64:.3g}"
    rtfx = report.split("### RTFx", 1)[1].split("###", 1)[0]
    assert "| beyond the measured range: <= 376 " in rtfx  # 64 s of audio in at least 0.17 s
    assert "a bound, not a prediction" in report


def test_skipped_cells_are_predicted_and_marked():
    """A cost known exactly: time = 0.01 + 0.02 B L s, memory = 1e8 + 1e7 B L bytes."""
    time_of = lambda a, b, r: (0.01 + 0.02 * a * b) / (a * b)  # noqa: E731 - RTF of that time
    memory_of = lambda a, b: 1e8 + 1e7 * a * b  # noqa: E731
    lengths, batches = [1, 2, 4, 8], [1, 2, 4]
    skip = {(4, 4), (8, 2), (8, 4)}
    report = render_markdown(results(grid_records(time_of, lengths, batches, skip=skip, memory_of=memory_of)))
    table, _ = rtf_table(report)
    # 8 s x 4: time 0.01 + 0.64 = 0.65 s over 32 s of audio: RTF 0.0203
    assert table["8 s"]["4"].startswith("~0.0203 [") and table["8 s"]["4"].endswith("(pred)")
    assert table["1 s"]["1"] == "0.0300 [0.0300, 0.0300]"  # measured cells are untouched
    assert "`summary` block, apart from the measured records" in report
    peak = report.split("### Peak memory (GB)", 1)[1]
    assert "| ~0.420 [" in peak  # 1e8 + 1e7 x 32 bytes = 0.42 GB
    rtfx = report.split("### RTFx", 1)[1].split("###", 1)[0]
    assert "| ~49.2 [" in rtfx and "skipped" not in rtfx  # 32 s of audio / 0.65 s


def test_full_grid_gets_a_held_out_validation():
    time_of = lambda a, b, r: (0.01 + 0.02 * a * b + 0.001 * b * a * a) / (a * b)  # noqa: E731
    report = render_markdown(results(grid_records(time_of, [1, 2, 4, 8], [1, 2, 4],
                                                  memory_of=lambda a, b: 1e8 + 1e7 * a * b)))
    section = report.split("Held-out validation of the predictions", 1)[1]
    assert "| batch time" in section and "| peak memory" in section
    assert "| 0.0 %" in section  # an exact model predicts the corner exactly


def test_a_grid_still_being_measured_gets_no_held_out_validation():
    """Mid-run, one corner cell measured and two to come: no triangle of a grid that is not the grid."""
    time_of = lambda a, b, r: (0.01 + 0.02 * a * b) / (a * b)  # noqa: E731
    records = [m for m in grid_records(time_of, [1, 2, 4, 8], [1, 2, 4], memory_of=lambda a, b: 1e8 + 1e7 * a * b)
               if (m.cell.audio_s, m.cell.batch_size) not in {(8, 2), (8, 4)}]
    assert held_out_validation(records) == {}
    assert "Held-out validation" not in render_markdown(results(records))


def test_csv_keeps_predictions_apart_from_measurements():
    time_of = lambda a, b, r: (0.01 + 0.02 * a * b) / (a * b)  # noqa: E731
    records = grid_records(time_of, [1, 2, 4, 8], [1, 2, 4], skip={(8, 4)}, memory_of=lambda a, b: 1e8 + 1e7 * a * b)
    rows = list(csv.DictReader(io.StringIO(render_csv(results(records)))))
    predicted = [r for r in rows if r["status"] == "predicted"]
    assert len(predicted) == 1 and (predicted[0]["audio_s"], predicted[0]["batch_size"]) == ("8", "4")
    assert float(predicted[0]["rtf_median"]) == pytest.approx(0.65 / 32, rel=1e-6)
    assert float(predicted[0]["peak_memory_gb"]) == pytest.approx(0.42, rel=1e-6)
    assert [r for r in rows if r["status"] == "skipped"][0]["rtf_median"] == ""  # the measured row stays empty
    assert "rtf [0.02031, 0.02031];" in predicted[0]["message"]
    # Beyond the measured range: no value, the bound and why in the message.
    records = grid_records(time_of, [1, 2, 4, 32], [1, 2], skip={(32, 1), (32, 2)}, memory_of=lambda a, b: 1e8)
    far = [r for r in csv.DictReader(io.StringIO(render_csv(results(records))))
           if r["status"] == "predicted" and r["batch_size"] == "2"]
    assert far[0]["rtf_median"] == "" and far[0]["wall_s_median"] == ""
    assert f"rtf beyond the measured range, >= {0.17 / 64:.4g} (extrapolated 8x beyond" in far[0]["message"]
