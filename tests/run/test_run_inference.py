"""sbprof run on an inference script (tests/run/recipes/infer) calling a local pretrained EncoderASR."""
from __future__ import annotations


import pytest

from run_helpers import INFER, measured, records, sbprof_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    from sbprof.models import build_local_model

    return build_local_model("encoder_asr", tmp_path_factory.mktemp("models"))


def test_each_call_is_a_step_with_its_audio_seconds(tmp_path, model_folder):
    done = sbprof_run(["--warmup", "1", "--measured", "5", "--output_folder", str(tmp_path / "out"), str(INFER),
                       "--source", str(model_folder), "--batches", "8", "--batch_size", "2", "--seconds", "0.5"],
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    calls = records(tmp_path / "out")["transcribe_batch"]
    assert calls["extra"]["kind"] == "inference" and len(calls["wall_s"]) == 5
    assert measured(calls, "audio_s") == [1.0] * 5 and measured(calls, "utterances") == [2] * 5
    # The script's own perf_counter around each call: all 8 ran (the stage's plan has 11 steps: 1 warm-up, 5
    # measured, a memory, 2 per-module and 2 traced ones), calls 2 to 6 measured.
    outside = [float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("call_s")]
    assert len(outside) == 8 and calls["extra"]["roles"][:7] == ["flops"] + ["measured"] * 5 + ["memory"]
    # The script's clock encloses the step's, never shorter.
    assert all(ours <= theirs for ours, theirs in zip(calls["wall_s"], outside[1:6]))
    # Between them only the hooks' bookkeeping, or a garbage collection that may fall on either side; on a busy
    # machine a preemption there too (it only widens the gap, and hits only the steps it falls on: two of three
    # middle steps read 11-13 % with four CPU-bound processes on 2 cores). So at least one step agrees.
    gaps = [(theirs - ours) / theirs for ours, theirs in zip(calls["wall_s"], outside[1:6])]
    assert min(gaps) <= 0.05, gaps
    report = (tmp_path / "out" / "report.md").read_text()
    rtf = sum(calls["wall_s"]) / 5.0
    assert "| RTF / RTFx " in report and f"{rtf:.3g}"[:4] in report
