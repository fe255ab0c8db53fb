"""Points, runs and variants in the order they are measured; what each worker loads and calls (in-process)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers.compare_fakes import BUSY, write_compare_yaml
from helpers.fake_interfaces import use_test_environment, write_model_folder
from sbprof.compare_models.config import load_config
from sbprof.compare_models.plan import Plan
from sbprof.jobs.plan import Batch
from sbprof.jobs.preamble import Setting
from sbprof.jobs.runner import View
from sbprof.models.source import LoadedModel
from sbprof.record import Measurement
from sbprof.results.store import ResultStore


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path_factory):
    use_test_environment(monkeypatch, tmp_path_factory.getbasetemp() / "sbprof-models")


def config(tmp_path: Path, **keys):
    folder = write_model_folder(tmp_path / "busy", rtf=0.01)
    (tmp_path / "conv.yaml").write_text("sample_rate: 8000\nmodel: !new:torch.nn.Conv1d\n"
                                        "    in_channels: 1\n    out_channels: 4\n    kernel_size: 5\n")
    variants = [{"name": "a", "source": str(folder), **BUSY},
                {"name": "b", "source": str(folder), **BUSY, "overrides": {"rtf": 0.05}},
                {"name": "conv", "yaml": "conv.yaml", "module": "model"}]
    return load_config(str(write_compare_yaml(tmp_path / "c.yaml", variants, **keys)))


@pytest.mark.parametrize("vary, value, expected", [
    ("audio_s", 1.5, (1.5, 1, {})),
    ("frames", 300, (3.0, 1, {"frames": 300})),
    ("batch_size", 8, (2.0, 8, {})),
])
def test_point_cell_puts_the_varied_value_in_its_coordinate(tmp_path, vary, value, expected):
    cfg = config(tmp_path, vary=vary, values=[value])
    cell = Plan(cfg).cell(Setting("cpu", 1), cfg.variants[1], value)
    assert (cell.audio_s, cell.batch_size, cell.params) == expected
    assert (cell.variant, cell.run, cell.model) == ("b", 0, str(tmp_path / "busy"))


def test_runs_are_interleaved_across_variants_and_stored_points_are_kept(tmp_path):
    cfg = config(tmp_path, repeats={"runs": 2})
    plan = Plan(cfg)
    store = ResultStore(tmp_path, plan.header())
    store.add(Measurement(label="done", cell=plan.cell(Setting("cpu", 1), cfg.variants[0], 0.5), wall_s=[0.1],
                          cpu_s=[0.1]))
    batches = []
    for step in plan.steps(View(store, retry_failed=False)):  # what the runner does: each batch's records stored
        assert isinstance(step, Batch)
        batches.append((step.payload["variant"], sorted((i.cell.audio_s, i.cell.run) for i in step.items)))
        store.add_many(Measurement(label="m", cell=i.cell, wall_s=[0.1], cpu_s=[0.1]) for i in step.items)
    # each pass one more run of each point (the stored run 0 of a at 0.5 s is kept: its run 1 comes first)
    assert batches == [("a", [(0.5, 1), (1, 0)]), ("b", [(0.5, 0), (1, 0)]), ("conv", [(0.5, 0), (1, 0)]),
                       ("a", [(1, 1)]), ("b", [(0.5, 1), (1, 1)]), ("conv", [(0.5, 1), (1, 1)])]
    assert plan.header().models["b"]["overrides"] == {"rtf": 0.05}


def test_overrides_reach_the_loaded_interface_and_modules_are_called_on_waveforms(tmp_path):
    cfg = config(tmp_path)
    busy = LoadedModel(cfg.variant("b").source, "cpu", 0, str(tmp_path))
    assert busy.model.hparams.rtf == 0.05
    conv = LoadedModel(cfg.variant("conv").source, "cpu", 0, str(tmp_path))
    assert conv.sample_rate == 8000 and sum(p.numel() for p in conv.modules.parameters()) == 4 * 1 * 5 + 4
    call, seconds = conv.prepare(0.5, 1)
    assert seconds == 0.5 and call().shape == torch.Size([4, 3996])  # [1, 4000 samples] read as [channel, time]
