"""Stages that interleave, measured by the default run (tests/run/recipes/brain/memory.py): one batch per epoch,
training steps that hold a known 300 MB and validation steps a known 50 MB (half in 64 KiB tensors, half in one
large tensor), a test stage of 2 batches, and a second Brain fitted before the evaluation.

Ground truths outside sbprof: the bytes each step allocates; the test loader's length; the trace files' own marks.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_helpers import BRAIN, measured, records, sbprof_run

pytestmark = pytest.mark.slow
TRAIN_BYTES, EVAL_BYTES = 300e6, 50e6


def test_each_stage_reads_its_own_memory_and_trace_and_a_short_test_stage_is_measured(tmp_path):
    done = sbprof_run(["--output_folder", str(tmp_path / "out"), str(BRAIN / "memory.py"), str(BRAIN / "hparams.yaml"),
                       "--output_folder", str(tmp_path / "recipe"), "--train_bytes", str(TRAIN_BYTES),
                       "--eval_bytes", str(EVAL_BYTES), "--test_batches", "2", "--second_brain", "1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    stages = records(tmp_path / "out")
    assert list(stages) == ["train", "valid", "brain2.train", "brain2.valid", "test"]
    # One batch per epoch: the default run ran as many epochs as the plan's 12 steps needed, for every stage.
    for name in ("train", "valid", "brain2.train", "brain2.valid"):
        stage = stages[name]
        assert len(stage["wall_s"]) == 5 and stage["extra"]["roles"].count("memory") == 1
        # Each stage's memory comes from its own step (the train steps between two valid steps are never in it).
        expected = TRAIN_BYTES if name.endswith("train") else EVAL_BYTES
        assert stage["memory"]["peak_rss_delta_bytes"] == pytest.approx(expected, rel=0.10), name
        # Each stage's traces hold its own steps only, one file per run of them (epochs interleave the stages).
        assert len(stage["extra"]["traces"]) == 2
        for path in stage["extra"]["traces"]:
            marks = {e["name"].split(" #")[0] for e in json.loads(Path(path).read_text())["traceEvents"]
                     if e.get("name", "").startswith("sbprof.step: ")}
            assert marks == {f"sbprof.step: {name}"}, (path, marks)
    # The second Brain is its own section, named for it.
    assert stages["brain2.train"]["extra"]["brain"] == {"number": 2, "class_name": "MemoryBrain"}
    # The test stage has 2 batches (fewer than --warmup 2 + 1): one warm-up step (it counts FLOPs), one measured,
    # and the report says so.
    test = stages["test"]
    assert test["extra"]["roles"] == ["flops", "measured"] and len(test["wall_s"]) == 1
    assert measured(test, "utterances") == [1]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "fewer than --warmup 2 + 1: measured with 1 warm-up step" in report
    assert "## Stage `brain2.train` (brain, Brain 2: MemoryBrain)" in report
    assert "recipe finished" not in done.stdout  # stopped once evaluate returned


def test_stages_measures_only_the_named_stage_and_stops_the_script_once_it_has_its_steps(tmp_path):
    # One batch per epoch: train's 12 planned steps take 12 epochs, each with its valid step between (unrecorded).
    hparams = [str(BRAIN / "memory.py"), str(BRAIN / "hparams.yaml"), "--output_folder", str(tmp_path / "recipe"),
               "--train_bytes", "1e6", "--eval_bytes", "1e6", "--test_batches", "2", "--second_brain", "1"]
    done = sbprof_run(["--stages", "train", "--no-trace", "--output_folder", str(tmp_path / "out"), *hparams],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    stages = records(tmp_path / "out")
    assert list(stages) == ["train"] and len(stages["train"]["wall_s"]) == 5
    # Stopped at the first step after train's plan: the second Brain and the test stage never ran.
    assert "recipe finished" not in done.stdout
    assert "was stopped by sbprof once its steps were recorded" in (tmp_path / "out" / "report.md").read_text()
    # A stage the script never reaches: one line, exit 2.
    done = sbprof_run(["--stages", "trian", "--no-trace", "--output_folder", str(tmp_path / "none"), *hparams],
                      cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--stages trian: no step of trian was seen (did you mean 'train'?); the script's stages: train, valid, "
        "brain2.train, brain2.valid, test")
