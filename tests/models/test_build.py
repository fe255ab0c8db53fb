"""Tests of sbprof.models.build: offline build, load and call of local models."""

from __future__ import annotations

import threading
import zipfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

import pytest
import soundfile
import torch

from sbprof.models.interfaces import make_call, resolve_interface
from sbprof.models import build as build_module
from sbprof.models import (
    LOCAL_MODELS,
    build_local_model,
    load_local_model,
    model_dir,
)

EXAMPLE_AUDIO = Path(__file__).resolve().parents[2] / "sbprof" / "data" / "example_audio.wav"
BATCH = 2
SAMPLES = 16000  # 1 s at 16 kHz


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and a busy second core would
    stall them: run this module on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model root for the whole module: each model is built once."""
    return tmp_path_factory.mktemp("models")


class _LazyModels(dict):
    """Loads a local model the first time a test asks for it."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> Any:
        self[name] = load_local_model(name, root=self.root)
        return self[name]


@pytest.fixture(scope="module")
def models(root: Path) -> Dict[str, Any]:
    """Loaded models by name, shared by the module's tests."""
    return _LazyModels(root)


def _is_text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_asr(out: Any) -> None:
    words, tokens = out
    assert _is_text_list(words) and len(words) == BATCH
    assert len(tokens) == BATCH


def _check_classifier(out: Any) -> None:
    out_prob, score, index, labels = out
    assert out_prob.shape == (BATCH, 12)
    assert score.shape == index.shape == (BATCH,)
    assert _is_text_list(labels) and len(labels) == BATCH


def _check_speaker(out: Any) -> None:
    score, decision = out
    assert score.shape[0] == decision.shape[0] == BATCH
    assert decision.dtype == torch.bool


def _check_enhancement(out: Any) -> None:
    assert out.shape == (BATCH, SAMPLES)


def _check_separation(out: Any) -> None:
    assert out.shape == (BATCH, SAMPLES, 2)


def _check_vad(out: Any) -> None:
    # One probability per 10 ms frame (centred frames: 101 for 1 s).
    assert out.shape == (BATCH, 101, 1)
    assert ((out >= 0) & (out <= 1)).all()


def _check_streaming(out: Any) -> None:
    assert _is_text_list(out) and len(out) == BATCH


# What each local model's built-in call must return for 1 s, batch 2.
CHECKS: Dict[str, Callable[[Any], None]] = {
    "encoder_asr": _check_asr,
    "encoder_decoder_asr": _check_asr,
    "classifier": _check_classifier,
    "speaker": _check_speaker,
    "enhancement": _check_enhancement,
    "separation": _check_separation,
    "vad": _check_vad,
    "slu": _check_asr,
    "streaming_asr": _check_streaming,  # one chunk through transcribe_chunk (StreamingASR has no batch call)
}


def test_every_local_model_has_a_check() -> None:
    assert set(CHECKS) == set(LOCAL_MODELS)


@pytest.mark.parametrize("name", sorted(LOCAL_MODELS))
def test_builtin_call_on_one_second(name: str, models: Dict[str, Any]) -> None:
    model = models[name]
    assert type(model).__name__ == LOCAL_MODELS[name]
    generator = torch.Generator().manual_seed(0)
    wavs = 0.1 * torch.randn(BATCH, SAMPLES, generator=generator)
    if LOCAL_MODELS[name] == "StreamingASR":
        from speechbrain.utils.dynamic_chunk_training import DynChunkTrainConfig

        config = DynChunkTrainConfig(32, 2)  # 20,448 samples per chunk: the second holds in one chunk
        out = model.transcribe_chunk(model.make_streaming_context(config), wavs)
    else:
        out = make_call(model, resolve_interface(LOCAL_MODELS[name]), wavs, torch.ones(BATCH))()
    CHECKS[name](out)


@pytest.mark.parametrize("name", sorted(LOCAL_MODELS))
def test_loaded_weights_are_the_checkpoints(
    name: str, models: Dict[str, Any], root: Path
) -> None:
    """Parameter transfer is lenient (missing keys only warn): check it."""
    model = models[name]
    folder = model_dir(name, root)
    modules = {
        key: obj
        for key, obj in model.hparams.pretrainer.loadables.items()
        if isinstance(obj, torch.nn.Module) and obj.state_dict()
    }
    assert modules
    for key, module in modules.items():
        saved = torch.load(folder / f"{key}.ckpt", map_location="cpu")
        loaded = module.state_dict()
        assert saved.keys() == loaded.keys()
        for tensor_name, tensor in saved.items():
            assert torch.equal(tensor, loaded[tensor_name].cpu()), tensor_name


@pytest.mark.parametrize("name", ["encoder_asr", "encoder_decoder_asr", "slu"])
def test_tokenizer_matches_output_size(name: str, models: Dict[str, Any]) -> None:
    model = models[name]
    assert model.tokenizer.vocab_size() == model.hparams.output_neurons


def test_encoder_decoder_asr_transcribes_example_audio(
    models: Dict[str, Any],
) -> None:
    assert isinstance(models["encoder_decoder_asr"].transcribe_file(str(EXAMPLE_AUDIO)), str)


@pytest.mark.parametrize("seconds", [1, 4])
def test_encoder_decoder_asr_decodes_a_fixed_token_rate(models: Dict[str, Any], seconds: int) -> None:
    """Speech and noise alike decode int(0.4 x encoder frames) search steps (the last emits <eos>).

    An untrained decoder would otherwise stop at an arbitrary step, so its cost would follow no law of
    the input length (a 2 s cut of the example decoded longer than a 4 s one).
    """
    asr = models["encoder_decoder_asr"]
    speech, rate = soundfile.read(str(EXAMPLE_AUDIO), dtype="float32", frames=seconds * 16000)
    noise = torch.Generator().manual_seed(0)
    for wav in (torch.from_numpy(speech), 0.1 * torch.randn(seconds * 16000, generator=noise)):
        batch, lengths = wav.repeat(BATCH, 1), torch.ones(BATCH)
        frames = asr.encode_batch(batch, lengths).shape[1]
        _, tokens = asr.transcribe_batch(batch, lengths)
        assert frames == 25 * seconds  # 4x time pooling of 10 ms frames
        assert [len(t) for t in tokens] == [int(frames * asr.hparams.max_decode_ratio) - 1] * BATCH


def test_example_audio_format() -> None:
    info = soundfile.info(str(EXAMPLE_AUDIO))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert 4.0 <= info.duration <= 6.0
    assert EXAMPLE_AUDIO.stat().st_size < 250_000


def _files(folder: Path) -> Dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}


def test_builds_in_two_roots_are_identical(tmp_path: Path) -> None:
    for name in LOCAL_MODELS:
        first = _files(build_local_model(name, tmp_path / "a"))
        second = _files(build_local_model(name, tmp_path / "b"))
        assert first.keys() == second.keys()
        for relative, path in first.items():
            other = second[relative]
            if not zipfile.is_zipfile(path):  # hparams, tokenizer, labels
                assert path.read_bytes() == other.read_bytes(), relative
                continue
            tensors = torch.load(path, map_location="cpu")
            other_tensors = torch.load(other, map_location="cpu")
            assert tensors.keys() == other_tensors.keys(), relative
            for key, value in tensors.items():
                if isinstance(value, torch.Tensor):
                    assert torch.equal(value, other_tensors[key]), (relative, key)
                else:  # e.g. the sample count of normalisation statistics
                    assert value == other_tensors[key], (relative, key)


def test_second_build_reuses_the_folder(root: Path) -> None:
    folder = build_local_model("vad", root)
    before = {rel: p.stat().st_mtime_ns for rel, p in _files(folder).items()}
    assert build_local_model("vad", root) == folder
    after = {rel: p.stat().st_mtime_ns for rel, p in _files(folder).items()}
    assert before == after


def test_folder_name_follows_hparams_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = model_dir("vad", tmp_path)
    edited = tmp_path / "hparams" / "vad" / "hyperparams.yaml"
    edited.parent.mkdir(parents=True)
    text = build_module.hparams_path("vad").read_text()
    edited.write_text(text.replace("rnn_neurons: 32", "rnn_neurons: 48"))
    monkeypatch.setattr(build_module, "_HPARAMS_DIR", tmp_path / "hparams")
    assert model_dir("vad", tmp_path) != original
    assert model_dir("vad", tmp_path).name.startswith("vad-")


def test_default_root_from_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBPROF_CACHE", str(tmp_path))
    assert model_dir("vad").parent == tmp_path


@pytest.mark.parametrize("function", [build_local_model, load_local_model, model_dir])
def test_unknown_model_name(function: Callable[..., Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no_such_model") as error:
        function("no_such_model", root=tmp_path)
    for name in LOCAL_MODELS:
        assert name in str(error.value)


def test_concurrent_builds_share_one_folder(tmp_path: Path) -> None:
    results: Dict[int, Path] = {}

    def build(index: int) -> None:
        results[index] = build_local_model("vad", tmp_path)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results.values())) == 1
    # Nothing but the finished folder: no staging folder left behind.
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name]


def test_losing_a_build_race_keeps_the_winner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process publishes the same model while this one is building."""
    folder = model_dir("vad", tmp_path)
    write_model = build_module._write_model

    def write_then_lose_race(name: str, staging: Path) -> None:
        write_model(name, staging)
        folder.mkdir()
        (folder / "winner").write_text("published first")

    monkeypatch.setattr(build_module, "_write_model", write_then_lose_race)
    assert build_local_model("vad", tmp_path) == folder
    assert [p.name for p in folder.iterdir()] == ["winner"]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_build_leaves_global_rng_alone(tmp_path: Path) -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    build_local_model("vad", tmp_path)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.cuda
def test_load_on_cuda(root: Path) -> None:
    model = load_local_model("encoder_asr", device="cuda", root=root)
    spec = resolve_interface("EncoderASR")
    words, _ = make_call(model, spec, torch.randn(BATCH, SAMPLES), torch.ones(BATCH))()
    assert len(words) == BATCH
