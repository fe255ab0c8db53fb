"""The training recipe end to end on a tiny configuration: records, figures against outside ground truth."""
import json

import pytest
import torch

from sbprof.base.errors import ConfigError
from sbprof.registry import get_job
from sbprof.jobs.runner import run_config
from sbprof.results import load_results
from sbprof.train.config import validate
from sbprof.train.data import mock_batches
from sbprof.train.plan import Plan
from helpers.train_tiny import tiny_overrides


def run_training(cfg):
    return run_config(get_job("train"), cfg, log=lambda line: None)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    cfg = validate({**tiny_overrides(folder), "profiling": {"export_trace": True, "trace_steps": 1}}, "tiny.yaml",
                   {"noprogressbar": True})
    outcome = run_training(cfg)
    return cfg, outcome, load_results(outcome.results)


def test_every_variant_is_one_ok_record(run):
    cfg, outcome, results = run
    assert outcome.measured == 2 and not outcome.failed
    assert [m.label for m in results.records] == ["train:ctc", "train:transducer"]
    assert all(m.ok and len(m.wall_s) == 2 and m.warmup == 1 for m in results.records)


def test_audio_per_step_is_the_batches_real_content(run):
    cfg, _, results = run
    data = mock_batches(2, 2, 0.05, 16000, 12, seed=cfg.preamble.seed)
    # steps cycle the batches: warm-up step 0 (batch 0), then batches 1 and 0
    for m in results.records:
        expected = []
        for b in (1, 0):
            wavs, lens = data.batches[b].sig
            expected.append(float((lens * wavs.shape[1]).round().sum()) / 16000)
        assert m.extra["audio_s_per_step"] == pytest.approx(expected)


def test_the_breakdown_covers_the_decorators_steps(run):
    _, _, results = run
    agree = []
    for m in results.records:
        modules = m.extra["modules"]
        assert modules["steps"] == 2 and modules["mode"] == "light"
        # Two clocks on the same steps: the attribution's step runs inside the decorator's, so it never reads more,
        # load or not. A preemption between the two clocks widens only the steps it hits (seen: 46.0 against
        # 51.3 ms over two steps with four CPU-bound processes on 2 cores); a wrong span would move every step.
        for attributed, wall in zip(modules["step_ms_samples"], m.wall_s):
            assert attributed <= wall * 1e3 + 0.05
            agree.append(attributed >= 0.9 * wall * 1e3)
        labels = {r["label"] for r in modules["rows"]}
        assert {"CNN", "enc", "enc.transformer.encoder.layers.0.mha_layer", "optimizer", "(other)"} <= labels
        assert m.extra["params"]["total"] == m.counts.params
    assert any(agree)


def test_counts_against_the_models_own_tensors(run):
    cfg, _, results = run
    from sbprof.train.models import build_modules

    for m in results.records:
        modules = torch.nn.ModuleDict(build_modules(m.cell.model, cfg.model, 16000, cfg.preamble.seed))
        assert m.counts.params == sum(p.numel() for p in modules.parameters())
        flops = m.extra["flops"]
        assert len(flops["per_step"]) == 2 and all(f > 0 for f in flops["per_step"])
        assert m.counts.flops == pytest.approx(sum(flops["per_step"]) / 2)
    transducer = results.records[1].extra["flops"]
    assert "torchaudio.rnnt_loss_forward" in transducer["untracked"]  # not priced, and said so


def test_memory_peaks_and_module_memory(run):
    cfg, _, results = run
    from sbprof.train.models import build_modules

    for m in results.records:
        assert m.memory.peak_rss_bytes > 0 and m.memory.peak_rss_delta_bytes >= 0
        cnn = build_modules(m.cell.model, cfg.model, 16000, cfg.preamble.seed)["CNN"]
        rows = {r["label"]: r for r in m.extra["modules"]["rows"]}
        assert rows["CNN"]["memory"]["params_bytes"] == 4 * sum(p.numel() for p in cnn.parameters())
        peak = m.extra["modules"]["memory_peak"]
        assert peak["Parameter"] == 4 * m.counts.params and peak["Optstate"] >= 2 * peak["Parameter"]  # Adam


def test_trace_with_detailed_labels(run):
    _, _, results = run
    for m in results.records:
        files = m.extra["trace_files"]
        assert files
        names = {e.get("name") for e in json.loads(open(files[0]).read())["traceEvents"]}
        assert "sbprof.backward:CNN" in names and "sbprof.forward:enc" in names
        assert m.extra["modules_detailed"]["mode"] == "detailed"


def test_running_again_keeps_the_results_and_refuses_other_rules(run):
    cfg, _, results = run
    again = run_training(cfg)
    assert again.resumed == 2 and not again.measured
    changed = validate({**tiny_overrides(cfg.preamble.output_folder), "seed": 7}, "tiny.yaml")
    with pytest.raises(ConfigError, match="seed: 1234 there, 7 now"):
        run_training(changed)


def test_a_selection_matching_nothing_stops_before_training(tmp_path):
    cfg = validate({**tiny_overrides(tmp_path), "profiling": {"modules": ["decoder.*"]}}, "tiny.yaml")
    with pytest.raises(ConfigError, match="profiling.modules: pattern 'decoder.*' matches no module"):
        Plan(cfg)
    assert not (tmp_path / "results.json").exists() or not load_results(tmp_path).records


def test_cpu_figures_replay_the_records_and_the_report_defines_them(run):
    cfg, outcome, results = run
    from sbprof.analysis.train import analyse

    summary = analyse(results)
    for cell in summary.cells:
        m, f = next(r for r in results.records if r.cell == cell.cell), cell.figures
        # CPU time per step never exceeds what the worker's threads could burn in the step's wall time
        assert len(m.cpu_s) == len(m.wall_s) and all(0 < c <= w * m.cell.threads * 1.05 + 0.005
                                                     for c, w in zip(m.cpu_s, m.wall_s))
        assert f.cpu_cost == pytest.approx(sum(m.cpu_s) / sum(m.extra["audio_s_per_step"][-len(m.cpu_s):]))
    report = (outcome.results.parent / "report.md").read_text()
    assert "CPU cost (core-seconds per audio second)" in report and "CPU cost = summed CPU time" in report
