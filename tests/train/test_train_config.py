"""train_profile.yaml and its checks: the shipped file loads, mistakes are one line naming key and file."""
from pathlib import Path

import pytest

from sbprof.base.errors import ConfigError
from sbprof.train.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_file_loads_with_its_documented_defaults():
    cfg = load_config(ROOT / "train_profile.yaml")
    assert cfg.variants == ("ctc", "transducer") and cfg.data.scale == 0.25 and cfg.model.vocab_size == 500
    assert cfg.preamble.warmup == 2 and cfg.preamble.measured == 6 and cfg.profiling.modules == "default"
    assert cfg.preamble.cpu_threads == (1,) and cfg.preamble.devices == ("cpu",)


def test_overrides_merge_nested_keys(tmp_path):
    cfg = load_config(ROOT / "train_profile.yaml", {"data": {"batch_size": 2}, "variants": ["ctc"]})
    assert cfg.data.batch_size == 2 and cfg.data.num_batches == 4 and cfg.variants == ("ctc",)


@pytest.mark.parametrize("text, message", [
    ("variants: [ctc, rnnt]\n", "variants: unknown variant 'rnnt'"),
    ("variants: [ctc, ctc]\n", "lists a variant twice"),
    ("data: {batch_size: 0}\n", "data.batch_size must be an integer >= 1, got 0"),
    ("data: {scale: -1}\n", "data.scale must be a positive number, got -1"),
    ("model: {d_model: 30, nhead: 4}\n", "model.d_model (30) must be a multiple of model.nhead (4)"),
    ("measured: 0\n", "measured must be an integer >= 1"),
    ("model: {kernel_size: 30}\n", "model.kernel_size must be odd"),
    ("profiling: {modules: 3}\n", "profiling.modules must be 'default'"),
    ("profiling: {memory: yes please}\n", "profiling.memory must be True or False"),
    ("devise: cpu\n", "unknown key 'devise' (did you mean 'devices'?)"),
    ("devices: tpu\n", "'tpu' is not a device"),
    ("\n# only a comment\n", "the file is empty"),
])
def test_mistakes_are_config_errors_naming_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value) and (str(path) in str(info.value))


def test_cuda_asked_for_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is present")
    path = tmp_path / "t.yaml"
    path.write_text("devices: cuda:0\n")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        load_config(path)
