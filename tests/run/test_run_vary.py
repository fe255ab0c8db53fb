"""``sbprof run --vary``: variants of a recipe whose costs are known (sleeps: load cannot stretch them), each run a
fresh ``sbprof run`` process, the ratios read from the comparison's own results against the ratios the costs imply.

Each comparison is a few fresh processes (a few seconds each on a quiet machine): three comparisons in all.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from run_helpers import INFER, RECIPES, sbprof_run

from sbprof.analysis.run import run_payload
from sbprof.analysis.vary import analyse, half_width
from sbprof.results import load_results

VARY = RECIPES / "vary" / "loop.py"


def _compare(tmp_path: Path, *options: str, script_args=(), script=VARY):
    out = tmp_path / "cmp"
    proc = sbprof_run([*options, "--output_folder", str(out), str(script), *script_args], cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return analyse(load_results(out)), out, proc


def _variant(report, name):
    return next(v for v in report.variants if v.name == name)


def test_more_workers_give_the_ratio_the_sleep_implies_and_a_failing_variant_is_recorded(tmp_path):
    # Each item sleeps 100 ms, each step naps 100 ms: without workers a step's loop is 200 ms, with 2 workers the
    # items arrive every 50 ms and the step (100 ms) sets the pace: 2.0x; with 4, every 25 ms: still 2.0x.
    report, out, proc = _compare(tmp_path, "--vary", "num_workers: [0, 2, 4]", "--vary", "args: ['', '--fail']",
                                 "--vary-one-at-a-time", "--rounds", "3", "--max-rounds", "5", "--precision", "0.3",
                                 "--warmup", "3", "--measured", "4",
                                 script_args=["--steps", "14", "--sleep_ms", "100", "--call_ms", "100"])
    workers = _variant(report, "num_workers 2")
    # adaptive repeats: the sleeps keep the ratio within +-30 % from 3 rounds (1.86x [1.73, 2.16], +-12 %, at load
    # 9.7 on 2 cores), so no round is added
    assert half_width(workers.figures["audio_per_s"]) < 0.3 and workers.runs == 3 and not report.notes
    for name in ("num_workers 2", "num_workers 4"):
        ratio = _variant(report, name).figures["audio_per_s"].ratio
        assert abs(ratio.ratio / 2.0 - 1) < 0.15, (name, ratio)
        assert ratio.low > 1 and not _variant(report, name).figures["audio_per_s"].no_change
    assert workers.loss_change == 0.0  # the same batches, the same math
    assert report.winner in ("num_workers 2", "num_workers 4")  # the same 2.0x: either may read the higher
    # The base's first run learns the stages; every later run measures only the main one (--stages train).
    asked = {p.parent.name + "/" + p.name: json.loads((p / "results.json").read_text())["rules"].get("stages")
             for p in (out / "variants").glob("*/round*") if (p / "results.json").is_file()}
    assert asked.pop("base/round0") is None and set(map(str, asked.values())) == {"['train']"}, asked
    failing = _variant(report, "--fail")
    assert failing.runs == 0 and len(failing.failures) == 1  # its first run failed: not run again
    assert "RuntimeError: the recipe's own error" in failing.failures[0]
    text = (out / "report.md").read_text()
    assert text.count("\n") > 10 and f"**{report.winner}**: " in text and "--fail, round 1: exit status 1" in text
    plot = out / "plots" / "vary-throughput.png"
    assert "](plots/vary-throughput.png)" in text and plot.read_bytes()[:4] == b"\x89PNG"
    # re-rendered from results.json alone, nothing run: the report and the plot rewritten
    plot.unlink()
    again = sbprof_run(["--render-only", str(out)], cwd=tmp_path)
    assert again.returncode == 0 and (out / "report.md").read_text() == text and plot.read_bytes()[:4] == b"\x89PNG"


def test_the_recipes_own_batch_size_gives_the_ratio_its_costs_imply(tmp_path):
    # A step costs 40 ms a call and 5 ms an utterance: batch 1, 45 ms an utterance; batch 8, 80 ms for 8, 10 ms
    # an utterance: 4.5x the utterances per second.
    report, _, _ = _compare(tmp_path, "--vary", "batch_size: [1, 8]", "--rounds", "3", "--max-rounds", "3",
                            "--warmup", "1",
                            "--measured", "3", script_args=["--steps", "9", "--call_ms", "40", "--utt_ms", "5"])
    big = _variant(report, "batch_size 8")
    ratio = big.figures["utterances_per_s"].ratio
    assert abs(ratio.ratio / 4.5 - 1) < 0.15, ratio
    assert ratio.low > 1 and report.winner == "batch_size 8"


def test_fp16_without_a_scaler_is_flagged_and_never_the_winner(tmp_path):
    # --overflow: the input, scaled past fp16's largest value, overflows once autocast casts it; fp32 is untouched.
    report, out, _ = _compare(tmp_path, "--vary", "precision: [fp32, fp16]", "--rounds", "2", "--warmup", "1",
                              "--measured", "3", script_args=["--steps", "8", "--overflow"])
    fp16 = _variant(report, "precision fp16")
    assert fp16.runs == 2 and not fp16.loss_ok and math.isinf(fp16.loss_change)
    assert report.winner is None and "precision fp16" not in report.ranking
    losses = json.loads((out / "variants" / "precision_fp16" / "round0.losses.json").read_text())
    assert losses and not all(math.isfinite(x) for x in losses)
    assert "Loss changed beyond 2 %, never ranked: precision fp16" in (out / "report.md").read_text()


def test_a_bad_spec_is_one_line_and_exit_2(tmp_path):
    for spec, said in (("num_worker: [0, 2]", "did you mean 'num_workers'"),
                       ("num_workers: 2", "at least two values"), ("precision: [fp32, fp8]", "fp32 / bf16 / fp16"),
                       ("threads [1, 2]", "give one knob and its values")):
        proc = sbprof_run(["--vary", spec, str(VARY)], cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("sbprof: error: --vary") and said in lines[0], lines
    assert not (tmp_path / "results").exists()


def test_an_option_the_script_refuses_fails_its_variant_in_one_line_naming_it(tmp_path):
    report, out, proc = _compare(tmp_path, "--vary", "args: ['', '--batch_sz 2']", "--rounds", "2", "--warmup", "0",
                                 "--measured", "2", script_args=["--steps", "3"])
    said = [line for line in proc.stderr.splitlines() if line.startswith("sbprof: variant")]
    assert said == ["sbprof: variant '--batch_sz 2' failed in round 1: exit status 2: loop.py: error: unrecognized "
                    "arguments: --batch_sz 2"], proc.stderr[-2000:]
    refused = _variant(report, "--batch_sz 2")
    assert refused.runs == 0 and _variant(report, "base").runs == 2
    assert "unrecognized arguments: --batch_sz 2" in (out / "report.md").read_text()


def test_try_suggested_fires_the_data_loading_verdict_then_measures_more_workers_and_names_them(tmp_path):
    # The base run's items sleep 100 ms beside a 100 ms step: the data-loading verdict fires (about half the loop),
    # so more workers are measured (2 and 4, capped at the cores) and read the 2.0x the sleeps imply.
    script = ["--steps", "12", "--sleep_ms", "100", "--call_ms", "100"]
    report, out, proc = _compare(tmp_path, "--try", "suggested", "--rounds", "3", "--max-rounds", "3", "--warmup",
                                 "3", "--measured", "4", script_args=script)
    said = proc.stderr.splitlines()
    assert said.index("sbprof: the base run: sbprof run of the script as it is, into "
                      f"{out / 'base_run'}") < min(i for i, line in enumerate(said) if "round 1/" in line)
    assert (out / "base_run" / "report.md").is_file()
    suggested = [v for v in report.variants[1:]]
    assert suggested and all(v.name.startswith("num_workers ") for v in suggested)
    assert all(v.suggested_by.startswith("data loading: Stage `train`: Waiting for data") for v in suggested)
    ratio = _variant(report, report.winner).figures["audio_per_s"].ratio
    assert report.winner.startswith("num_workers ") and ratio.low > 1 and abs(ratio.ratio / 2.0 - 1) < 0.15, ratio
    text = (out / "report.md").read_text()
    assert f"- **{report.winner}**: suggested by the data loading verdict (Stage `train`" in text
    # the same command again: the base run and every round are found, nothing rerun
    again = sbprof_run(["--try", "suggested", "--rounds", "3", "--max-rounds", "3", "--warmup", "3", "--measured",
                        "4", "--output_folder", str(out), str(VARY), *script], cwd=tmp_path)
    assert again.returncode == 0 and "(run before)" in again.stderr and "round 1/" not in again.stderr


def test_try_suggested_with_nothing_to_suggest_says_so_in_one_line_and_exits_0(tmp_path):
    # no item sleep and a 300 ms step: the few ms of collating a batch stay far below a tenth of the loop
    proc = sbprof_run(["--try", "suggested", "--warmup", "1", "--measured", "2", "--output_folder",
                       str(tmp_path / "cmp"), str(VARY), "--steps", "4", "--call_ms", "300"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if "no verdict" in line]
    assert said == ["sbprof: no verdict of the base run suggests a variant sbprof can measure: nothing to compare "
                    f"(the base's report: {tmp_path / 'cmp' / 'base_run' / 'report.md'})"]
    assert "# sbprof run" in proc.stderr and not (tmp_path / "cmp" / "variants").exists()
    # Other script arguments into the same folder: the stored base run was of another command, so it runs again.
    other = sbprof_run(["--try", "suggested", "--warmup", "1", "--measured", "2", "--output_folder",
                        str(tmp_path / "cmp"), str(VARY), "--steps", "4", "--call_ms", "250"], cwd=tmp_path)
    assert other.returncode == 0 and "(run before)" not in other.stderr
    assert f"the base run in {tmp_path / 'cmp' / 'base_run'} was of another command" in other.stderr
    assert "sbprof: the base run: sbprof run of the script as it is" in other.stderr
    bad = sbprof_run(["--try", "everything", str(VARY)], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == ("sbprof: error: --try takes 'suggested' (the variants the "
                                                          "base run's verdicts suggest), got 'everything'")


def test_adaptive_repeats_add_rounds_while_a_ratio_is_wide_say_why_and_resume(tmp_path):
    # The variant's steps nap 50 ms plus up to 400 ms drawn at random: its ratio cannot be +-10 % from 3 or 4 runs,
    # so a 4th round is added (and said), then --max-rounds ends it.
    options = ["--vary", "args: ['', '--jitter_ms 400']", "--rounds", "3", "--max-rounds", "4", "--warmup", "1",
               "--measured", "3"]
    report, out, proc = _compare(tmp_path, *options, script_args=["--steps", "5", "--call_ms", "50"])
    assert [v.runs for v in report.variants] == [4, 4]
    assert len(report.notes) == 1 and report.notes[0].startswith(
        "round 4 added: the throughput ratio is wider than +-10 % for --jitter_ms 400 +-"), report.notes
    assert "round 4 added" in (out / "report.md").read_text()
    again = sbprof_run([*options, "--output_folder", str(out), str(VARY), "--steps", "5", "--call_ms", "50"],
                       cwd=tmp_path)
    assert again.returncode == 0 and "round 1/" not in again.stderr
    assert load_results(out).notes == report.notes  # nothing rerun, no reason said twice


def test_the_cpu_cost_includes_the_dataloader_workers_spins(tmp_path):
    # Each item spins 40 ms of CPU (in a worker with num_workers 2), each step 20 ms: 60 ms of CPU a step either
    # way, the workers' share 40/60 with workers and 0 without; collating, the model and sbprof add a little.
    # The workers run up to 4 items ahead (2 workers x prefetch 2), so the dataset holds more items than the run
    # takes steps: in the measured window they make as many items as the loop takes.
    report, _, _ = _compare(tmp_path, "--vary", "num_workers: [0, 2]", "--rounds", "2", "--max-rounds", "2",
                            "--warmup", "2", "--measured", "4",
                            script_args=["--steps", "30", "--item_spin_ms", "40", "--spin_ms", "20"])
    # A worker's CPU is read from /proc in clock ticks (10 ms on Linux): each worker's reading of a run's 4 measured
    # steps can fall short by up to one tick, so with workers the floor is 60 ms less 2 ticks over 4 steps.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    for name, share, floor in (("base", 0.0, 0.060), ("num_workers 2", 40 / 60, 0.060 - 2 * tick / 4)):
        v = _variant(report, name)
        cost = v.figures["cpu_cost"].over_runs.median * 0.1  # per audio second -> per step (0.1 s of audio a step)
        assert floor <= cost < 0.060 * 1.25, (name, cost)
        assert abs(v.figures["workers_cpu_share"].over_runs.median - share) < 0.1, name


def test_bad_comparison_options_are_one_line_and_exit_2(tmp_path):
    for options, said in ((["--rounds", "4", "--max-rounds", "3"], "--max-rounds (3) must be at least --rounds (4)"),
                          (["--precision", "0"], "--precision must be a relative half-width above 0"),
                          (["--stages", "valid"], "--stages cannot go with it")):
        proc = sbprof_run(["--vary", "num_workers: [0, 2]", *options, str(VARY)], cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and said in lines[0], proc.stderr
    assert not (tmp_path / "results").exists()


def test_an_inference_script_varies_its_own_batch_size(tmp_path):
    from sbprof.models import build_local_model

    model = build_local_model("encoder_asr", tmp_path / "models")
    report, out, _ = _compare(tmp_path, "--vary", "batch_size: [1, 4]", "--rounds", "3", "--max-rounds", "3",
                              "--warmup", "1", "--measured", "3", script=INFER,
                              script_args=["--source", str(model), "--batches", "9", "--seconds", "0.5"])
    assert report.stage == "transcribe_batch" and report.throughput == "audio_per_s"
    big = _variant(report, "batch_size 4")
    assert big.runs == 3 and big.figures["audio_per_s"].ratio is not None and big.loss_change is None
    # Each measured call carries the audio the script gave it: 1 and 4 utterances of 0.5 s.
    stored = load_results(out)
    for variant, audio in (("base", 0.5), ("batch_size 4", 2.0)):
        runs = [m for m in stored.records if m.cell.params.get("variant") == variant]
        assert len(runs) == 3 and all(run_payload(m).audio_s[1:4] == [audio] * 3 for m in runs), variant
