"""Loading and validating the sweep YAML: every mistake stops the run with one clear line."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers.fake_interfaces import replace_in_file, write_model_folder, write_sweep_yaml
from helpers.paths import ROOT as REPO
from sbprof.base.errors import ConfigError
from sbprof.cli.overrides import parse_command_line
from sbprof.jobs.preamble import FLAGS, VALUES, default_cpu_threads
from sbprof.sweep.config import load_config
from sbprof.sweep.schema import SCHEMA
from sbprof.base.yamlconfig import shipped_example

EXAMPLE = shipped_example()


def parse(argv):
    return parse_command_line(argv, list(SCHEMA), FLAGS, VALUES)


@pytest.fixture
def yaml_path(tmp_path) -> Path:
    return write_sweep_yaml(tmp_path / "sweep.yaml", "encoder_asr", "EncoderASR")


def test_repository_profile_yaml_is_valid_and_offline(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / "elsewhere" / "profile.yaml"  # copied out of the repository, it still finds the recording
    copy.parent.mkdir()
    copy.write_text((REPO / "profile.yaml").read_text())
    cfg = load_config(copy)
    assert cfg.pretrained_model.source == "encoder_asr" and cfg.pretrained_model.kind == "local_model"
    dims = cfg.profiling_dimensions
    assert dims.audio_mockup_secs == (1, 2, 5, 8, 32) and dims.batch_sizes == (1, 4, 8)
    assert dims.triangle_only is True
    assert Path(dims.example_audio) == EXAMPLE
    assert cfg.preamble.output_folder == str(tmp_path / "results" / "profile")  # cwd-relative, as in SpeechBrain
    assert cfg.preamble.cpu_threads == default_cpu_threads()
    cpu_settings = [s for s in cfg.settings if s.device == "cpu"]
    assert [s.threads for s in cpu_settings] == list(default_cpu_threads())


def test_defaults_thread_counts():
    assert default_cpu_threads(1) == (1,)
    assert default_cpu_threads(16) == (1, 2, 4, 8, 16)
    assert default_cpu_threads(12) == (1, 2, 4, 8, 12)


@pytest.mark.parametrize("old, new, expected", [
    ("seed: 0", "sede: 0", "unknown key 'sede' (did you mean 'seed'?)"),
    ("    batch_sizes:", "    batch_size:",
     "unknown key 'profiling_dimensions.batch_size' (did you mean 'profiling_dimensions.batch_sizes'?)"),
    ("    type: EncoderASR", "    type: EncoderASR\n    sorce: x",
     "unknown key 'pretrained_model.sorce' (did you mean 'pretrained_model.source'?)"),
    ("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [0.5, -1]",
     "profiling_dimensions.audio_mockup_secs must hold only positive numbers, got -1"),
    ("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [0, 1]", "audio_mockup_secs"),
    ("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: []", "non-empty list"),
    ("audio_mockup_secs: [0.5, 1]", "audio_mockup_secs: [1, 1]", "lists a value twice"),
    ("batch_sizes: [1, 2]", "batch_sizes: [0, 2]",
     "profiling_dimensions.batch_sizes must hold only positive integers, got 0"),
    ("batch_sizes: [1, 2]", "batch_sizes: [1.5]", "positive integers, got 1.5"),
    ("batch_sizes: [1, 2]", "batch_sizes: 4", "must be a non-empty list"),
    ("example_audio: null", "example_audio: missing.wav", "example_audio: no such file"),
    ("type: EncoderASR", "type: EncoderASRR",
     "no class 'EncoderASRR' in speechbrain.inference (did you mean 'EncoderASR'?)"),
    ("type: EncoderASR", "type: VAD", "does not fit local model 'encoder_asr', built as EncoderASR"),
    ("source: encoder_asr", "source: encoder_ars", "(did you mean 'encoder_asr'?)"),
    ("devices: [cpu]", "devices: [tpu]", "devices: 'tpu' is not a device"),
    ("example_audio: null", "example_audio: ''", "example_audio must be null, 'example' or a path"),
    ("output_folder: ", "output_folder: ''\n#", "output_folder must be a non-empty path"),
    ("devices: [cpu]", "devices: [cpu, cpu]", "twice"),
    ("cpu_threads: [1]", "cpu_threads: [0]", "cpu_threads"),
    ("warmup: 1", "warmup: -1", "warmup must be an integer >= 0"),
    ("measured: 2", "measured: 0", "measured must be an integer >= 1"),
    ("triangle_only: False", "triangle_only: maybe", "triangle_only must be True or False"),
])
def test_bad_values_name_file_key_and_value(yaml_path, old, new, expected):
    replace_in_file(yaml_path, old, new)
    with pytest.raises(ConfigError) as info:
        load_config(yaml_path)
    message = str(info.value)
    assert message.startswith(str(yaml_path)), message
    assert expected in message
    assert "\n" not in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_is_refused(yaml_path):
    replace_in_file(yaml_path, "devices: [cpu]", "devices: [cuda]")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        load_config(yaml_path)


def test_missing_sections_and_files(tmp_path, yaml_path):
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "nope.yaml")
    for name, text, expected in (("empty.yaml", "", "the file is empty"), ("blank.yaml", "# nothing\n\n", "empty"),
                                 ("list.yaml", "- a\n- b\n", "top level must be a mapping"),
                                 ("scalar.yaml", "42\n", "top level must be a mapping")):
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=expected):
            load_config(tmp_path / name)
    replace_in_file(yaml_path, "    source: encoder_asr\n", "")
    with pytest.raises(ConfigError, match="missing key 'pretrained_model.source'"):
        load_config(yaml_path)
    (tmp_path / "broken.yaml").write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="broken.yaml"):
        load_config(tmp_path / "broken.yaml")


def test_user_defined_interface_checks(tmp_path):
    folder = write_model_folder(tmp_path / "busy", rtf=0.01)
    path = write_sweep_yaml(tmp_path / "s.yaml", str(folder), "helpers.fake_interfaces.BusyInterface",
                            method="process", args=["wavs", "wav_lens"])
    cfg = load_config(path)
    assert cfg.pretrained_model.kind == "folder" and cfg.pretrained_model.method == "process"
    replace_in_file(path, "method: process", "method: procss")
    with pytest.raises(ConfigError, match="has no method 'procss'"):
        load_config(path)
    replace_in_file(path, "method: procss", "method: process")
    replace_in_file(path, "args: [wavs, wav_lens]", "args: [wavs, lens]")
    with pytest.raises(ConfigError, match="unknown argument name 'lens'"):
        load_config(path)
    replace_in_file(path, "    method: process\n    args: [wavs, lens]\n", "")
    with pytest.raises(ConfigError, match="give both `method` and `args`"):
        load_config(path)
    path = write_sweep_yaml(tmp_path / "s.yaml", str(tmp_path), "helpers.fake_interfaces.BusyInterface",
                            method="process", args=["wavs"])
    with pytest.raises(ConfigError, match="holds no hyperparams.yaml"):
        load_config(path)


def test_hub_ids_are_accepted_as_sources(yaml_path):
    replace_in_file(yaml_path, "source: encoder_asr", "source: speechbrain/asr-conformer-transformerlm-librispeech")
    cfg = load_config(yaml_path)
    assert cfg.pretrained_model.kind == "hub"  # loading it needs network: that happens in the worker


def test_relative_paths_follow_the_yaml_folder(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.wav").write_bytes(EXAMPLE.read_bytes())
    path = write_sweep_yaml(tmp_path / "sub" / "s.yaml", "encoder_asr", "EncoderASR", example_audio="a.wav")
    monkeypatch.chdir(REPO)
    assert load_config(path).profiling_dimensions.example_audio == str(tmp_path / "sub" / "a.wav")
    replace_in_file(path, "example_audio: a.wav", "example_audio: b.wav")  # a missing one names its resolved path
    with pytest.raises(ConfigError, match=f"no such file '{tmp_path / 'sub' / 'b.wav'}'"):
        load_config(path)


def test_example_audio_without_samples_is_refused_before_loading_a_model(tmp_path):
    import soundfile

    soundfile.write(str(tmp_path / "silent.wav"), [], 16000)  # a valid header, no frames
    path = write_sweep_yaml(tmp_path / "s.yaml", "encoder_asr", "EncoderASR", example_audio=tmp_path / "silent.wav")
    with pytest.raises(ConfigError, match="holds no samples"):
        load_config(path)


def test_more_threads_than_cores_is_accepted_with_a_warning(yaml_path):
    import os

    cores = os.cpu_count()
    replace_in_file(yaml_path, "cpu_threads: [1]", f"cpu_threads: [1, {cores + 2}]")
    cfg = load_config(yaml_path)
    assert cfg.preamble.cpu_threads == (1, cores + 2)
    assert len(cfg.preamble.warnings) == 1 and f"exceed this machine's {cores} logical cores" in cfg.preamble.warnings[0]


def test_speechbrain_style_overrides(yaml_path, tmp_path):
    argv = [str(yaml_path), "--output_folder", str(tmp_path / "o"), "--seed=7",
            "--profiling_dimensions", "{batch_sizes: [4], triangle_only: True}", "--device", "cpu",
            "--noprogressbar"]
    param_file, overrides, run_options = parse(argv)
    assert param_file == str(yaml_path) and run_options == {"device": "cpu", "noprogressbar": True}
    cfg = load_config(param_file, overrides, run_options)
    assert cfg.preamble.output_folder == str(tmp_path / "o") and cfg.preamble.seed == 7
    # Nested overrides merge key by key: the lengths stay from the file.
    assert cfg.profiling_dimensions.batch_sizes == (4,)
    assert cfg.profiling_dimensions.audio_mockup_secs == (0.5, 1)
    assert cfg.profiling_dimensions.triangle_only is True
    assert cfg.preamble.progress_bar is False and cfg.preamble.devices == ("cpu",)


@pytest.mark.parametrize("argv, expected", [
    (["--sed", "3"], "unknown option --sed (did you mean 'seed'?)"),
    (["--debug"], "--debug is a SpeechBrain training option; sbprof does not use it"),
    (["--precision", "fp16"], "--precision is a SpeechBrain training option"),
    (["--noprogressbar", "maybe"], "--noprogressbar is a flag: give it alone, or true / false, not 'maybe'"),
    (["--noprogressbar=maybe"], "--noprogressbar is a flag"),
    (["--seed"], "--seed needs a value"),
    (["3"], "'3' is not an option"),
    (["--seed", "[1"], "--seed '[1' is not a valid YAML value"),
])
def test_bad_command_lines(yaml_path, argv, expected):
    with pytest.raises(ConfigError) as info:
        parse([str(yaml_path)] + argv)
    assert expected in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("argv, options", [
    (["--noprogressbar"], {"noprogressbar": True}),
    (["--noprogressbar", "True"], {"noprogressbar": True}),
    (["--noprogressbar=false"], {"noprogressbar": False}),
    (["--retry-failed"], {"retry_failed": True}),
])
def test_speechbrain_flags_that_make_sense_here(yaml_path, argv, options):
    assert parse([str(yaml_path)] + argv) == (str(yaml_path), {}, options)


def test_bad_overrides(yaml_path):
    """Named as sbprof.run's overrides= from Python (before: 'command line'), as the command line's from it."""
    with pytest.raises(ConfigError, match="^overrides=: unknown key 'sed' .*did you mean 'seed'"):
        load_config(yaml_path, {"sed": 3})
    path, overrides, options = parse([str(yaml_path), "--profiling_dimensions", "{batch_size: [2]}"])
    with pytest.raises(ConfigError, match="^command line: unknown key 'profiling_dimensions.batch_size'"):
        load_config(path, overrides, options)
    with pytest.raises(ConfigError, match="profiling_dimensions.batch_sizes"):
        load_config(yaml_path, {"profiling_dimensions": {"batch_sizes": [-1]}})


def test_config_round_trips_for_workers(yaml_path):
    from sbprof.sweep.schema import SweepConfig

    cfg = load_config(yaml_path)
    again = SweepConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.settings == cfg.settings
