"""CUDA ground truth of the stream job: a fake streaming model whose every chunk is one GPU kernel of about 140 ms
(per 500 ms chunk), served on cuda:0 in real time. Each chunk's compute latency (sbprof's clock around
``transcribe_chunk``, the device synchronised) against the CUDA events the model records around its kernel (median,
sbprof's clock encloses them: 0 to +5 %); the streams per GPU the capacity search finds against a simulation, written
here, of the same first-come-first-served queue fed with the chunk times the events measured (within one stream)."""
from __future__ import annotations

import pytest

from benchmarks.gpu_truths import check, keep_report, medians, simulated_streams, within_count
from helpers.fake_interfaces import replace_in_file, use_test_environment
from helpers.fake_cuda_models import write_cuda_fake_model
from helpers.stream_configs import write_stream_yaml
from sbprof.analysis.stream import analyse
from sbprof.cli import main
from sbprof.results import load_results

pytestmark = pytest.mark.cuda

COMPUTE_S, CHUNK_S = 0.140, 0.5  # 3 streams need 0.42 s of every 0.5 s, 4 would need 0.56 s: 3 fit


def test_chunk_latency_and_streams_per_gpu_against_cuda_events_and_a_simulated_queue(tmp_path, monkeypatch):
    use_test_environment(monkeypatch, tmp_path / "sbprof-models")
    events_file = tmp_path / "events.txt"
    model = write_cuda_fake_model(tmp_path / "fake", COMPUTE_S, events_file, frame_samples=1000, final_chunks=0)
    path = write_stream_yaml(tmp_path / "s.yaml", str(model),
                             type_name="helpers.fake_cuda_models.CudaFakeStreamingASR", audio_s=2.0,
                             output_folder=tmp_path / "out",
                             capacity={"chunk_size": 8, "left_context_chunks": 2, "max_streams": 8})
    replace_in_file(path, 'devices: "cpu"', 'devices: "cuda:0"')
    assert main(["stream", str(path), "--noprogressbar"]) == 0
    keep_report("stream-cuda", tmp_path / "out" / "report.md")
    setting = analyse(load_results(tmp_path / "out")).settings[0]
    (row,) = setting.rows
    assert row.chunk_ms == pytest.approx(CHUNK_S * 1e3)
    events = [float(v) for v in events_file.read_text().split()]
    assert len(events) >= row.chunks
    ours = [v / 1e3 for v in row.compute_sorted_ms]
    check(medians("stream on CUDA: chunk compute latency", ours, events, 0.05, "s", one_sided=True))
    simulated = simulated_streams(events, CHUNK_S, setting.capacity.target_ms / 1e3, 8)
    assert 2 <= simulated <= 4  # the kernels last about what was asked: the case is the one described above
    check(within_count("stream on CUDA: streams per GPU within the delay target", setting.capacity.capacity,
                       simulated, 1, "streams"))
