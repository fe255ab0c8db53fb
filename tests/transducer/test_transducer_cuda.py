"""The transducer-loss job's GPU backends on cuda:0: torchaudio's CUDA loss, and every other backend PyPI serves that
is installed here, each timed only after its losses and gradients agree with the reference on the GPU; a backend
that cannot run here is a row that says why (not installed, CPU only), never dropped."""
from __future__ import annotations

import pytest

from benchmarks.gpu_truths import Figure, check, keep_report, record
from sbprof.cli import main as sbprof_main
from sbprof.results import load_results

pytestmark = pytest.mark.cuda

BACKENDS = ["reference", "torchaudio", "speechbrain", "warprnnt_numba", "fast_rnnt", "optimized_transducer",
            "warp_rnnt", "warp_transducer"]  # k2 needs its own interpreter (Python 3.9, torch 1.13): not here


def test_transducer_backends_on_cuda_agree_with_the_reference_before_they_are_timed(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(f"backends: [{', '.join(BACKENDS)}]\nshapes: {{num_utterances: 16, scale: 4}}\n"
                    "batching: {batch_size: 4, max_frames: null}\nvocab_size: 500\njoiner_dim: 256\n"
                    f"warmup: 3\nmeasured: 5\ndevices: cuda:0\noutput_folder: {tmp_path / 'out'}\n")
    assert sbprof_main(["transducer", str(path), "--noprogressbar"]) == 0
    keep_report("transducer-cuda", tmp_path / "out" / "report.md")
    records = {m.label: m for m in load_results(tmp_path / "out").records}
    assert records["reference"].ok and records["torchaudio"].ok, records["torchaudio"].message
    for name in BACKENDS[1:]:
        m = records[name]
        if not m.ok:
            record(Figure(f"transducer {name} on CUDA", "-", "-", "not measured", None, note=m.message))
            continue
        agreement = m.extra["agreement"]
        step_us = sorted(m.wall_s)[len(m.wall_s) // 2] * 1e6
        check(Figure(f"transducer {name} on CUDA: loss and gradients against the reference, then timed",
                     f"{step_us:,.0f} µs a step (median of {len(m.wall_s)})",
                     "reference loss on the GPU", "agrees" if agreement["ok"] else f"disagrees: {agreement}",
                     bool(agreement["ok"]) and m.cell.device.startswith("cuda")))
