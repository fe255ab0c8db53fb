"""What limits a sweep (issue 33): each verdict fires on a workload built to have its limit and stays silent on one
without it.

The length-quadratic verdict is checked on real sweeps of a model whose cost is known in advance
(``helpers.fake_interfaces.LengthSpinInterface``: ``a*L + b*L^2`` seconds of CPU per utterance, so the crossing is
``a / b`` by construction). The threads, noise, memory and real-time rules are checked on hand-made records:
on this 2-core machine shared with other test runs, a live 1 -> 2 thread scaling test would measure the
neighbours, not the rule.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.fake_interfaces import use_test_environment, write_model_folder, write_sweep_yaml
from sbprof.analysis.limits import Limits
from sbprof.analysis.sweep import analyse
from sbprof.registry import get_job
from sbprof.jobs.render import summary_block
from sbprof.jobs.runner import run_config
from sbprof.record import Cell, Env, Measurement, MemoryPeak
from sbprof.record.codec import from_json
from sbprof.report.sweep_markdown import render_markdown
from sbprof.results import load_results
from sbprof.results.store import Results
from sbprof.sweep.config import load_config

SETTINGS = {"interface": "EncoderASR", "method": "transcribe_batch", "example_audio": None, "seed": 1234}


def record(audio_s, batch, rtf=None, threads=1, status="ok", run=0, peak=None, cores=16, others=None):
    """A hand-made sweep record whose four batches run at exactly ``rtf``; ``others``: the cores other processes
    kept busy while it was timed."""
    wall = [] if rtf is None else [rtf * audio_s * batch] * 4
    load = {} if others is None else {"others_cpu_s": others * sum(wall), "window_s": sum(wall)}
    return Measurement(label="c", status=status, warmup=1, wall_s=wall, cpu_s=wall,
                       cell=Cell(model="m", device="cpu", threads=threads, audio_s=audio_s, batch_size=batch,
                                 input="random:seed=1234", run=run),
                       audio_seconds=float(audio_s * batch), settings=dict(SETTINGS), env=Env(cpu_count=cores),
                       memory=None if peak is None else MemoryPeak(peak_rss_bytes=peak, peak_rss_delta_bytes=peak),
                       extra=load)


def reference(threads, run, wall):
    """The reference batch of one worker process (start and end alike): the setting's noise floor."""
    return [Measurement(label="r", cell=Cell(model="m", device="cpu", threads=threads, audio_s=1, batch_size=1,
                                             input="random:seed=1234", run=run),
                        wall_s=[wall] * 4, extra={"reference": position}) for position in ("start", "end")]


def limits_of(records, calibration=()) -> Limits:
    return analyse(Results("profile", rules={"measured": 4}, records=list(records),
                           calibration=list(calibration))).limits


def rules(limits: Limits):
    return [v.rule for v in limits.verdicts]


GRID = [(a, b) for a in (1, 2) for b in (1, 2)]


# --- threads: the rule on recorded figures ---------------------------------------------------------------------

def two_thread_settings(speedup):
    """The same 4 cells at 1 and 2 threads; at 2 threads every cell runs ``speedup`` times faster."""
    return ([record(a, b, 0.1, threads=1) for a, b in GRID]
            + [record(a, b, 0.1 / speedup, threads=2) for a, b in GRID])


def test_threads_fire_when_the_second_thread_does_not_pay_and_stay_silent_when_it_does():
    # 1 -> 2 threads at 1/1.05 speed: efficiency 1 / 1.05 / 2 = 47.6 % < 50 %.
    v, = [v for v in limits_of(two_thread_settings(1 / 1.05)).verdicts if v.rule == "threads"]
    efficiency = next(f for f in v.figures if f.name == "parallel efficiency")
    assert efficiency.value == pytest.approx(1 / 1.05 / 2)
    assert "from 1 to 2 threads" in v.sentence and "4 matched cells" in v.sentence
    # Geometric mean of the time per batch over the cells (0.1 s, 0.2 s, 0.2 s, 0.4 s at 1 thread).
    at_one = next(f for f in v.figures if f.name == "time at 1 threads")
    assert at_one.value == pytest.approx(math.exp((math.log(0.1) + 2 * math.log(0.2) + math.log(0.4)) / 4))
    # 1.9x faster with 2 threads: efficiency 95 %, no verdict.
    assert "threads" not in rules(limits_of(two_thread_settings(1.9)))


def test_a_difference_under_the_noise_floor_is_not_decided_and_the_reason_names_the_floor():
    # Two processes per setting whose reference batch took 20 ms and 24 ms: floor = |ln 1.2| / sqrt(2) = 12.9 %.
    floor = [m for t in (1, 2) for run, wall in ((0, 0.020), (1, 0.024)) for m in reference(t, run, wall)]
    # 2 threads 2 % slower than 1 (the rule alone would fire: efficiency 49 %), inside the floor.
    limits = limits_of(two_thread_settings(1 / 1.02), floor)
    assert "threads" not in rules(limits)
    why, = [u for u in limits.undecided if u.startswith("threads on cpu")]
    assert "noise floor (12.9 %)" in why and "differ by at most 2.0 %" in why
    # The same 2 % with a calm machine (floor 0.7 %: 20.0 and 20.2 ms): the verdict is decided.
    calm = [m for t in (1, 2) for run, wall in ((0, 0.0200), (1, 0.0202)) for m in reference(t, run, wall)]
    assert "threads" in rules(limits_of(two_thread_settings(1 / 1.02), calm))


def test_an_oversubscribed_setting_draws_no_verdict_that_needs_its_true_times():
    # 4 threads on 2 cores.
    records = [record(a, b, 0.1, threads=1, cores=2) for a, b in GRID] + [
        record(a, b, 0.2, threads=4, cores=2) for a, b in GRID]
    limits = limits_of(records)
    assert "threads" not in rules(limits)
    assert ("cpu, 4 threads: oversubscribed, its times are upper bounds: only an RTF below 1 decides; no verdict "
            "that needs the true times") in limits.undecided
    v, = [v for v in limits.verdicts if v.rule == "real-time" and v.sentence.startswith("cpu, 4 threads")]
    assert "RTF at most 0.2: measured while the setting was oversubscribed, an upper bound" in v.sentence
    assert any(u.startswith("threads on cpu: a setting is oversubscribed") for u in limits.undecided)


# --- real time on a crowded machine (issue 39): an upper bound below 1 proves real-time -----------------------------

CROWDED = 1.5  # cores other processes kept busy: with the worker's 1 thread, more than the machine's 2


def crowded(rtfs, others=CROWDED):
    return [record(a, b, r, cores=2, others=others) for (a, b), r in rtfs.items()]


def test_on_an_oversubscribed_setting_an_rtf_below_1_still_proves_real_time():
    fast = {(1, 1): 0.1, (1, 2): 0.2, (2, 1): 0.3, (2, 2): 0.6}
    summary = analyse(Results("profile", rules={"measured": 4}, records=crowded(fast)))
    assert summary.models[0].settings[0].oversubscribed  # 1 thread + 1.5 cores of others > 2 cores
    v, = [v for v in summary.limits.verdicts if v.rule == "real-time"]
    assert v.sentence == ("cpu, 1 thread stays real-time in every measured cell, up to 2 s x batch 2 (RTF at most "
                          "0.6: measured while the setting was oversubscribed, an upper bound).")
    assert v.figures[0].name == "RTF at 2 s x batch 2 (upper bound)" and v.figures[0].value == pytest.approx(0.6)
    assert "cpu, 1 thread: oversubscribed" in " ".join(summary.limits.undecided)
    # The same cells with the machine to itself: the ordinary verdict.
    calm = limits_of(crowded(fast, others=0.2))
    assert [v.sentence for v in calm.verdicts if v.rule == "real-time"] == [
        "cpu, 1 thread stays real-time in every measured cell, up to 2 s x batch 2 (RTF 0.6)."]


def test_on_an_oversubscribed_setting_an_rtf_at_or_above_1_decides_nothing():
    mixed = {(1, 1): 0.5, (1, 2): 0.8, (2, 1): 1.2, (2, 2): 1.5}
    limits = limits_of(crowded(mixed))
    v, = [v for v in limits.verdicts if v.rule == "real-time"]
    # What the upper bounds prove, up to the first cell whose bound is not below 1; not "is not real-time from".
    assert v.sentence == ("cpu, 1 thread stays real-time up to 1 s x batch 2 (RTF at most 0.8: measured while the "
                          "setting was oversubscribed, an upper bound).")
    assert ("cpu, 1 thread: real-time from 2 s x batch 1 on not decided: its RTF (1.2), measured while the setting "
            "was oversubscribed, is an upper bound; the true value may lie below 1") in limits.undecided
    # Every bound at or above 1: no verdict at all, and why.
    slow = limits_of(crowded({k: r + 1 for k, r in mixed.items()}))
    assert "real-time" not in rules(slow)
    assert any(u.startswith("cpu, 1 thread: real-time from 1 s x batch 1 on not decided") for u in slow.undecided)
    # The same slow cells on a calm machine: not real-time, decided.
    assert [v.sentence for v in limits_of(crowded(mixed, others=0.2)).verdicts if v.rule == "real-time"] == [
        "cpu, 1 thread is not real-time from 2 s x batch 1 (RTF 1.2); the largest real-time cell is 1 s x batch 2."]


# --- memory and real time ---------------------------------------------------------------------------------------

def test_the_cell_that_ran_out_of_memory_is_named_beside_the_largest_that_fitted():
    records = [record(1, 1, 0.1, peak=2_000_000_000), record(1, 2, 0.1, peak=3_000_000_000),
               record(2, 1, 0.1, peak=2_500_000_000), record(2, 2, status="oom")]
    v, = [v for v in limits_of(records).verdicts if v.rule == "memory"]
    assert v.sentence == ("cpu, 1 thread ran out of memory at 2 s x batch 2; the largest cell that fits is 2 s x "
                          "batch 1 (peak 2.5 GB).")
    # The same grid without the OOM cell: no memory verdict.
    assert "memory" not in rules(limits_of(records[:3] + [record(2, 2, 0.1, peak=4_000_000_000)]))


def test_real_time_names_the_first_cell_at_or_above_rtf_1_and_otherwise_the_largest_real_time_cell():
    slow = {(1, 1): 0.5, (1, 2): 0.8, (2, 1): 1.2, (2, 2): 1.5}
    v, = [v for v in limits_of([record(a, b, r) for (a, b), r in slow.items()]).verdicts if v.rule == "real-time"]
    # By seconds of audio in the batch, (1 s x 2) and (2 s x 1) tie at 2 s: the shorter utterance comes first.
    assert v.sentence == ("cpu, 1 thread is not real-time from 2 s x batch 1 (RTF 1.2); the largest real-time cell "
                          "is 1 s x batch 2.")
    assert (v.figures[0].value, v.figures[1].value, v.weight) == (pytest.approx(1.2), pytest.approx(0.8), 1.0)
    fast = {(1, 1): 0.1, (1, 2): 0.2, (2, 1): 0.3, (2, 2): 0.6}
    v, = [v for v in limits_of([record(a, b, r) for (a, b), r in fast.items()]).verdicts if v.rule == "real-time"]
    assert v.sentence == "cpu, 1 thread stays real-time in every measured cell, up to 2 s x batch 2 (RTF 0.6)."
    assert v.weight == pytest.approx(0.6)  # weighed by how close the largest cell comes to RTF 1


def test_the_verdicts_are_kept_in_results_json_terms_and_printed_last_in_the_report():
    records = [record(a, b, 0.1 * a, peak=10 ** 9) for a, b in GRID[:3]] + [record(2, 2, status="oom")]
    results = Results("profile", rules={"measured": 4}, records=records)
    summary = analyse(results)
    saved = json.loads(json.dumps(summary_block(get_job("profile"), summary)))  # as results.json holds it
    assert from_json(Limits, saved["limits"]) == summary.limits and summary.limits.verdicts
    report = render_markdown(summary)
    assert report.rstrip().split("\n## ")[-1].startswith("What limits this\n\n1. **memory.** cpu, 1 thread ran out")


# --- length-quadratic -------------------------------------------------------------------------------------------

def spin_records(linear_s, quadratic_s, overhead_s=0.001, wobble=0.0):
    """Cells timed at exactly ``overhead + B * (a*L + b*L^2)`` (times ``1 +- wobble``, signs in no pattern of
    B or L, so no term of the cost model can absorb them)."""
    out = []
    for sign, (a, b) in zip([1, -1, -1, 1, -1, 1, 1, -1], ((a, b) for a in (0.5, 1, 2, 4) for b in (1, 2))):
        t = (overhead_s + b * (linear_s * a + quadratic_s * a * a)) * (1 + wobble * sign)
        out.append(record(a, b, t / (a * b)))
    return out


def test_length_quadratic_on_recorded_figures_fires_at_a_over_b_and_not_without_b():
    v, = [v for v in limits_of(spin_records(0.004, 0.002)).verdicts if v.rule == "length-quadratic"]
    assert v.figures[0].name == "crossing length" and v.figures[0].value == pytest.approx(2.0)
    assert v.sentence == ("cpu, 1 thread: the length-quadratic term passes half of the cost at 2.00 s of audio and is "
                          "67 % of it at 4.00 s.")  # 0.002 * 4 / (0.004 + 0.002 * 4)
    assert "length-quadratic" not in rules(limits_of(spin_records(0.008, 0.0)))
    # Crossing past the longest length measured (0.004 / 0.0005 = 8 s > 4 s): silent.
    assert "length-quadratic" not in rules(limits_of(spin_records(0.004, 0.0005)))


def test_length_quadratic_is_undecided_when_the_cost_model_misses_its_held_out_cells():
    # +-30 % around the same costs: the fit cannot predict the cells it leaves out.
    limits = limits_of(spin_records(0.004, 0.002, wobble=0.3))
    assert "length-quadratic" not in rules(limits)
    why, = [u for u in limits.undecided if "length-quadratic" in u]
    assert "the cost model misses the cells it was not fitted on by" in why and why.endswith("over 20 %")


def test_the_noise_floor_withholds_real_time_and_length_quadratic_verdicts_it_hides():
    noisy = [m for run, wall in ((0, 0.020), (1, 0.024)) for m in reference(1, run, wall)]  # floor 12.9 %
    # RTF 1.05 at the first non-real-time cell: 5 % above 1, under the floor.
    limits = limits_of([record(a, b, 0.5 if a * b < 2 else 1.05) for a, b in GRID], noisy)
    assert "real-time" not in rules(limits)
    assert ("cpu, 1 thread: real-time undecided: the machine's noise floor (12.9 %) hides differences under that "
            "size: the RTF at 1 s x batch 2 and 1 differ by at most 5.0 %") in limits.undecided
    # A 1 s per-call overhead: at 4 s x batch 2 the quadratic term adds 0.002 x 16 x 2 = 64 ms of 1.096 s, 5.8 %.
    limits = limits_of(spin_records(0.004, 0.002, overhead_s=1.0), noisy)
    assert "length-quadratic" not in rules(limits)
    why, = [u for u in limits.undecided if "length-quadratic" in u]
    assert "noise floor (12.9 %)" in why and "differ by at most 5.8 %" in why
    # The same figures on a calm machine (floor 0.7 %): both decided.
    calm = [m for run, wall in ((0, 0.0200), (1, 0.0202)) for m in reference(1, run, wall)]
    assert "length-quadratic" in rules(limits_of(spin_records(0.004, 0.002, overhead_s=1.0), calm))


# --- length-quadratic: real sweeps of a model with a known quadratic term ------------------------------------------

@pytest.fixture
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


LENGTHS = [0.5, 1, 2, 4]


def sweep_of(tmp_path: Path, linear_s: float, quadratic_s: float):
    model = write_model_folder(tmp_path / "spin", linear_s=linear_s, quadratic_s=quadratic_s)
    path = write_sweep_yaml(tmp_path / "s.yaml", str(model), "helpers.fake_interfaces.LengthSpinInterface",
                            lengths=LENGTHS, batch_sizes=[1, 2], method="process", args=["wavs", "wav_lens"],
                            measured=3)
    run_config(get_job("profile"), load_config(path, None, {"noprogressbar": True}), log=lambda line: None)
    return analyse(load_results(tmp_path / "out"))


def test_length_quadratic_fires_at_the_spin_s_crossing_and_not_without_a_quadratic_term(tmp_path, environment):
    a, b = 0.004, 0.002  # per utterance: 4 ms per second of audio plus 2 ms per second squared: crossing 2 s
    summary = sweep_of(tmp_path / "quadratic", a, b)
    linear = sweep_of(tmp_path / "linear", 0.008, 0.0)
    assert "length-quadratic" not in rules(linear.limits)  # never, not even undecided, loaded or not
    assert not any("length-quadratic" in u for u in linear.limits.undecided)
    setting = summary.models[0].settings[0]
    if setting.oversubscribed:
        # Other processes' load makes the cells' times upper bounds (and their fit loose): the rule withholds the
        # verdict and says so; the crossing cannot be checked against the spin on such a machine.
        assert "length-quadratic" not in rules(summary.limits)
        assert any(u.startswith("cpu, 1 thread: oversubscribed") for u in summary.limits.undecided)
        pytest.skip(f"other processes kept {setting.others.mean:.2f} of {setting.cores} cores busy during the "
                    "sweep: the verdict was rightly withheld; the crossing was not checked")
    v, = [v for v in summary.limits.verdicts if v.rule == "length-quadratic"]
    crossing = v.figures[0]
    # The call's own work per second of audio (making and passing the batch) adds a little to the linear term, so
    # the fitted crossing sits just above a / b: 2.0025 s [2.0001, 2.0049] on a quiet machine, its interval then
    # narrower than that bias. So the crossing is held to the spin within 10 %, and lies inside its own interval.
    assert crossing.name == "crossing length" and crossing.value == pytest.approx(a / b, rel=0.1)
    assert crossing.low <= crossing.value <= crossing.high
    # At 4 s, 2 ms x 16 / (4 ms x 4 + 2 ms x 16) = 2/3 of the length-dependent cost is quadratic.
    share = next(f for f in v.figures if f.name == "quadratic share at the longest")
    assert share.value == pytest.approx(2 / 3, abs=0.1)
    # The fitted coefficients are exposed in the summary.
    assert setting.time_model.coefficient("B*L^2") == pytest.approx(b, rel=0.25)
