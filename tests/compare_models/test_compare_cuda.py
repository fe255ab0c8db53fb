"""CUDA ground truth of compare-models and the gate: a model whose call is one GPU kernel of known length per second
of audio, compared on cuda:0 in fresh workers (4 runs). Each point's latency against the CUDA events the model
records around its kernel (median; sbprof's clock encloses them: 0 to +5 %); the gate on CUDA records finds a 1.5x
slower variant regressed and the same results unchanged."""
from __future__ import annotations

import pytest

from benchmarks.gpu_truths import Figure, check, keep_report, medians
from helpers.compare_fakes import write_compare_yaml
from helpers.fake_interfaces import use_test_environment, write_model_folder
from sbprof.cli import main as sbprof_main
from sbprof.results import load_results

pytestmark = pytest.mark.cuda

GPU_BUSY = {"type": "helpers.fake_cuda_models.GpuBusyInterface", "method": "process", "args": ["wavs", "wav_lens"]}
RTF = 0.02  # 20 ms of GPU work per second of audio: 20 and 40 ms calls


def compare(tmp_path, name, rtf, capsys):
    """One comparison of the model (the same folder each time: the gate pairs cells by model) at ``rtf``."""
    events = tmp_path / f"{name}-events.txt"
    model = write_model_folder(tmp_path / "model", rtf=RTF, events_file="unused")
    variant = {"name": "gpu", "source": str(model), **GPU_BUSY, "overrides": {"rtf": rtf, "events_file": str(events)}}
    path = write_compare_yaml(tmp_path / f"{name}.yaml", [variant], values=[1, 2], measured=5, devices="cuda:0",
                              repeats="{runs: 4}", output_folder=str(tmp_path / name))
    assert sbprof_main(["compare-models", str(path), "--noprogressbar"]) == 0, capsys.readouterr().err
    return load_results(tmp_path / name), [float(v) for v in events.read_text().split()]


def gate(base, new, capsys):
    code = sbprof_main(["gate", str(base), str(new)])
    return code, capsys.readouterr().out


def test_compare_models_latency_on_cuda_and_the_gate_on_its_records(tmp_path, monkeypatch, capsys):
    use_test_environment(monkeypatch, tmp_path / "sbprof-models")
    base, base_events = compare(tmp_path, "base", RTF, capsys)
    slow, _ = compare(tmp_path, "slow", 1.5 * RTF, capsys)
    keep_report("compare-models-cuda", tmp_path / "base" / "report.md")
    records = [m for m in base.records if m.cell.audio_s == 2]
    assert len(records) == 4 and all(m.ok and m.cell.device.startswith("cuda") for m in records)
    ours = [w for m in records for w in m.wall_s]
    theirs = [e for e in base_events if e > 1.5 * RTF]  # the 2 s point's kernels (the 1 s point's last half as long)
    check(medians("compare-models on CUDA: latency of a 2 s call", ours, theirs, 0.05, "s", one_sided=True))
    code, out = gate(tmp_path / "base", tmp_path / "slow", capsys)
    check(Figure("gate on CUDA records: a variant 1.5x slower on the GPU", f"exit {code}: "
                 + out.strip().splitlines()[-1], "regressed (exit 1)", "found" if code == 1 else "missed",
                 code == 1 and "regressed" in out))
    code, out = gate(tmp_path / "base", tmp_path / "base", capsys)
    check(Figure("gate on CUDA records: the same results", f"exit {code}: " + out.strip().splitlines()[-1],
                 "unchanged (exit 0)", "found" if code == 0 else "false alarm", code == 0 and "unchanged" in out))
